"""Shared fixtures: a private state folder, the ../shared test data, the CLI as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KFLAB_SHARED", REPO.parent / "shared"))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh state folder, also exported as KFLAB_STATE for child processes."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("KFLAB_STATE", str(path))
    return path


@pytest.fixture
def shared() -> Path:
    """The read-only ../shared folder (upstream manifests, recipes); skip when absent."""
    if not (SHARED / "upstream").is_dir():
        pytest.skip(f"../shared not found at {SHARED} (set KFLAB_SHARED)")
    return SHARED


def run_kflab(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process (same interpreter), capturing its output."""
    full_env = {**os.environ, **(env or {}), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def kflab():
    return run_kflab
