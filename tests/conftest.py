"""Shared fixtures: a private state folder, the upstream test data, the CLI as a process; the
run's last line (passed, failed, skipped and each skip reason with its count)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# kflab's own settings in the caller's shell (a mirror in KFLAB_GITHUB_URL, KFLAB_BACKEND=cluster,
# a KFLAB_STATE...) would change what the product does under every test: the tests start from
# the product's defaults, and a test that wants one sets it. Kept: the test suite's own knobs.
TEST_KNOBS = ("KFLAB_SHARED", "KFLAB_STANDIN_CACHE", "KFLAB_TORCH_FIND_LINKS",
              "KFLAB_LEARNER_ENV", "KFLAB_DEBIAN_MIRROR", "KFLAB_TEST_")
for _name in [n for n in os.environ if n.startswith("KFLAB_") and not n.startswith(TEST_KNOBS)]:
    del os.environ[_name]


def _shared_root() -> Path:
    """Where the upstream test data is (the order scripts/fetch_upstream.py fills it in):
    $KFLAB_SHARED, else ../shared when it has upstream/ (CI), else .cache/shared (fetched)."""
    if os.environ.get("KFLAB_SHARED"):
        return Path(os.environ["KFLAB_SHARED"])
    sibling = REPO.parent / "shared"
    return sibling if (sibling / "upstream").is_dir() else REPO / ".cache" / "shared"


SHARED = _shared_root()


def upstream_missing(*parts: str) -> str | None:
    """Why SHARED/upstream/PARTS is absent (a skip reason, the same for every test), or None."""
    if (SHARED.joinpath("upstream", *parts)).exists():
        return None
    failed = SHARED / "upstream" / ".fetch-failed"
    why = failed.read_text().strip() if failed.is_file() else \
        "run python scripts/fetch_upstream.py (scripts/test.sh does)"
    return f"upstream test data not found in {SHARED}/upstream: {why}"


def need_upstream(*parts: str) -> Path:
    """SHARED/upstream/PARTS, or a skip that says why it is missing and how to get it."""
    why = upstream_missing(*parts)
    if why:
        pytest.skip(why)
    return SHARED.joinpath("upstream", *parts)


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


@pytest.fixture(autouse=True)
def _fresh_console() -> None:
    """kflab's rich console binds the stdout of its first use (lab/term/console.py); in a
    test that is pytest's capture of that test, closed afterwards: each test starts with
    none, so no test prints to another's closed stream (order-dependent failures)."""
    from lab.term import console

    console._console = None


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh state folder, also exported as KFLAB_STATE for child processes."""
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv("KFLAB_STATE", str(path))
    return path


@pytest.fixture
def shared() -> Path:
    """The folder holding upstream/ (the upstream manifests and API, read-only); skip when
    absent."""
    need_upstream()
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


def outcome_line(stats: dict[str, list]) -> str:
    """One line for the end of the run: counts, then each distinct skip reason with its count
    (most frequent first), so a run that skipped for want of something says what at a glance."""
    counts = {key: len(stats.get(key, []))  # pytest's own tallies (terminalreporter.stats)
              for key in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")}
    reasons: dict[str, int] = {}
    for rep in stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else \
            str(longrepr)
        reason = " ".join(reason.removeprefix("Skipped: ").split())
        reasons[reason] = reasons.get(reason, 0) + 1
    parts = [f"{counts['passed']} passed", f"{counts['failed']} failed",
             f"{counts['skipped']} skipped"]
    parts += [f"{counts[k]} {k}" for k in ("error", "xfailed", "xpassed") if counts[k]]
    line = "tests: " + ", ".join(parts)
    if reasons:
        line += " | skip reasons: " + "; ".join(
            f"{n}x {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1],
                                                                                      kv[0])))
    return line


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's last line (after pytest's own summary): scripts/test.sh and CI read it."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller prints the line
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not getattr(reporter, "stats", None):
        return
    reporter.write_line(outcome_line(reporter.stats))
