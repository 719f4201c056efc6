"""A full or read-only state folder, for real: a small tmpfs mounted as the state folder
(needs root or CAP_SYS_ADMIN; skipped otherwise -- tests/unit/test_state_safety.py
simulates the full disk at the write helper). kflab reports a clear error, never a
traceback, stops what it started, and no status is left Running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab.backends.local.procs import is_running

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
from tuning_helpers import TRIAL, experiment, write  # noqa: E402


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                          str(path)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or 'not root'})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def read_only_view(path: Path, view: Path) -> Iterator[Path]:
    """The same folder through a read-only bind mount (its writers keep writing to it)."""
    view.mkdir()
    subprocess.run(["mount", "--bind", str(path), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        yield view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def kflab(state: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def last_condition(res: subprocess.CompletedProcess[str]) -> dict:
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)["status"]["conditions"][-1]


def test_full_state_folder(tmp_path: Path) -> None:
    """Trials' logs fill a 1 MiB state folder: the apply ends with exit 2 and a message
    that says the disk is full and what to do; nothing runs on; the next look says Failed."""
    noisy = TRIAL + ("\nimport pathlib\npathlib.Path(f'{os.getpid()}.pid').touch()\n"
                     "for _ in range(400):\n    print('x' * 4096, flush=True)\n"
                     "time.sleep(30)\n")
    write(tmp_path, "trial.py", noisy)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment(maxTrialCount=4)))
    with tmpfs(tmp_path / "state", "1m") as state:
        res = kflab(state, "apply", "-f", "exp.yaml", cwd=tmp_path)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "no space left" in res.stderr and "--state" in res.stderr
        assert "Traceback" not in res.stdout + res.stderr
        pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
        assert pids and not any(is_running(p) for p in pids)
        last = last_condition(kflab(state, "get", "experiment", "exp", "-o", "json",
                                    cwd=tmp_path))
        assert last["type"] == "Failed", last


def test_read_only_state_folder(tmp_path: Path) -> None:
    """A run whose kflab was killed, seen through a read-only mount: reads still work and
    show the run Failed (its trials stopped, nothing saved); writes fail with a clear
    error; once writable again, the next look saves the Failed status."""
    write(tmp_path, "trial.py", TRIAL + "\nimport pathlib\npathlib.Path(f'{os.getpid()}.pid')"
                                        ".touch()\ntime.sleep(60)\n")
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment(maxTrialCount=4)))
    with tmpfs(tmp_path / "state", "8m") as state:
        env = {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO)}
        cli = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "exp.yaml"],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        end = time.monotonic() + 30
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
        assert len(pids) == 2
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        with read_only_view(state, tmp_path / "ro") as ro:
            res = kflab(ro, "get", "experiment", "exp", "-o", "json", cwd=tmp_path)
            last = last_condition(res)
            assert last["type"] == "Failed" and "not saved" in last["message"]
            assert "read-only" in last["message"]
            assert not any(is_running(p) for p in pids)
            res = kflab(ro, "apply", "-f", "exp.yaml", cwd=tmp_path)
            assert res.returncode == 2 and "read-only file system" in res.stderr, res.stderr
            assert "Traceback" not in res.stderr
            res = kflab(ro, "delete", "experiment", "exp", cwd=tmp_path)
            assert res.returncode == 2 and "read-only" in res.stderr, res.stderr
        last = last_condition(kflab(state, "get", "experiment", "exp", "-o", "json",
                                    cwd=tmp_path))
        assert last["type"] == "Failed" and "not saved" not in last["message"]
