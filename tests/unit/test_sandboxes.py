"""Concurrent unattended runs of one scenario get their own sandboxes: neither deletes the
other's files; a finished run's sandbox is pruned by the next run, a live one never."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lab.scenarios.loader import load_scenario
from lab.scenarios.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "tests" / "data" / "scenarios" / "hello-files"
HOLD = """
import sys
from pathlib import Path
from lab.scenarios.loader import load_scenario
from lab.scenarios.runner import sandbox
with sandbox(Path(sys.argv[1]), load_scenario(Path(sys.argv[2]))) as (state, work):
    work.mkdir(parents=True)
    (work / "mine.txt").write_text("held")
    print(work, flush=True)
    sys.stdin.readline()
"""


def test_a_live_sandbox_survives_another_run(state: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(state), str(HELLO)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert holder.stdout is not None
    held = Path(holder.stdout.readline().strip())
    assert (held / "mine.txt").read_text() == "held"
    result = run_scenario(load_scenario(HELLO), state, mode="test")
    assert result.ok, result.to_dict()
    mine = Path(result.workdir)
    assert mine != held and (held / "mine.txt").read_text() == "held"
    holder.communicate("\n", timeout=30)
    again = run_scenario(load_scenario(HELLO), state, mode="auto")
    assert again.ok
    left = sorted(p.name for p in (state / "sandboxes" / "hello-files").iterdir())
    assert left == [Path(again.workdir).parent.name]  # both finished ones were pruned


def test_two_cli_runs_at_once_both_pass(state: Path) -> None:
    env = {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO)}
    runs = [subprocess.Popen([sys.executable, "-m", "lab.cli", "scenario", "test", str(HELLO)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for _ in range(2)]
    outs = [r.communicate(timeout=120)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs


def test_a_report_waits_for_a_prune_in_progress_and_is_dropped_with_its_sandbox(
        state: Path) -> None:
    """Two CLI runs at once: the second may prune the first's finished sandbox while the first
    saves its report. Saving waits for the prune lock, then writes nothing and raises nothing."""
    import threading

    from lab import state as st
    from lab.scenarios import htmlreport

    result = run_scenario(load_scenario(HELLO), state, mode="test")
    run = Path(result.workdir).parent
    lock = state / "sandboxes" / "hello-files.lock"
    errors: list[BaseException] = []

    def save() -> None:
        try:
            htmlreport.save_last(result.to_dict())
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with st.held(lock):  # a pruning run holds it
        saver = threading.Thread(target=save)
        saver.start()
        saver.join(1.0)
        assert saver.is_alive() and not (run / htmlreport.SAVED).exists()
        st.remove(state, run)
    saver.join(30)
    assert not saver.is_alive() and errors == [] and not run.exists()
    again = run_scenario(load_scenario(HELLO), state, mode="test")
    htmlreport.save_last(again.to_dict())
    saved, folder = htmlreport.last(state, "hello-files")
    assert folder == Path(again.workdir).parent and saved["kind"] == "run"
