"""Shared fixtures: a private state folder, the ../shared test data, the CLI as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KFLAB_SHARED", REPO.parent / "shared"))


# The longest modules (a VM boot under TCG, every lab on the stand-in cluster, every lab's
# invariant) run first: scripts/test.sh hands whole files to its workers in collection order,
# and one of these started last would leave the other workers idle while it runs.
LONGEST_FIRST = ("tests/integration/test_vagrant_libvirt_up.py",
                 "tests/integration/test_cluster_backend.py",
                 "tests/scenarios/test_scenarios.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with `slow` tests before the rest, LONGEST_FIRST before those; otherwise the
    order is unchanged (a stable sort on whole modules, so module fixtures still start once)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.relative_to(REPO).as_posix() if item.path.is_relative_to(REPO) else ""
        if name in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(name)
        return (1 if item.path in slow else 2), 0

    items.sort(key=rank)


_FOLDER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each test's setup, call and teardown time by folder (tests/unit, tests/integration
    ...). Under xdist the reports reach the controller too, so the sum covers every worker."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = "/".join(report.nodeid.split("/")[:2])
    _FOLDER_SECONDS[folder] = _FOLDER_SECONDS.get(folder, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where pytest's time went, per folder: the CI time budget's per-phase table reads it.
    Sums of test durations: with several workers they add up to more than the wall time."""
    if not _FOLDER_SECONDS:
        return
    terminalreporter.section("time by folder (sum of test durations, all workers)")
    for folder, secs in sorted(_FOLDER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{secs:9.1f} s  {folder}")


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
