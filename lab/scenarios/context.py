"""What checks and solve actions act on: a backend, a work folder, an environment."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lab.backends.base import Backend


def tool_env(state_root: Path) -> dict[str, str]:
    """Environment for commands a scenario runs: this Python first on PATH, same state."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["KFLAB_STATE"] = str(state_root)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Context:
    backend: Backend
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    source: Path | None = None  # the scenario folder (reference files for `copy`)
