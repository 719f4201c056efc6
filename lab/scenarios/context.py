"""What checks and solve actions act on: a backend, a work folder, an environment."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.backends.base import Backend


def tool_env(state_root: Path, backend: Any = None) -> dict[str, str]:
    """Environment for commands a scenario runs: this Python first on PATH, same state, and
    the same backend (a `kflab get` inside a scenario's script asks the same place)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["KFLAB_STATE"] = str(state_root)
    env["PYTHONUNBUFFERED"] = "1"
    if backend is not None and getattr(backend, "name", None):
        env["KFLAB_BACKEND"] = backend.name
        for key, value in (("KFLAB_CONTEXT", getattr(backend, "context", None)),
                           ("KUBECONFIG", getattr(backend, "kubeconfig", None)),
                           ("KFLAB_NAMESPACE", getattr(backend, "namespace", None))):
            if value:
                env[key] = str(value)
    return env


@dataclass
class Context:
    backend: Backend
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    source: Path | None = None  # the scenario folder (reference files for `copy`)
