"""A re-run whose every task is a cache hit, as a learner sees it through the real CLI
(issue 33's walkthrough of the pipeline-classifiers lab): `kflab pipeline run` lists each
cached task as SKIPPED (cached) and names the run it reused, `get` counts it among the tasks,
`describe` says no task ran, and `logs --task` prints the log of the execution it reused
under a header naming that run and task -- on all three ways a run is answered: the start-up
fast path, the backend's replay from its memo, and the engine (no memo: each task looks the
cache up). KFP 2.16 reports a cache hit as SKIPPED (v2beta1 RuntimeState)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_kflab

PIPELINE = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def load(n: int) -> int:
    print("loading", n, "rows")
    return n

@dsl.component(install_kfp_package=False)
def train(rows: int) -> float:
    print("training on", rows, "rows: unique-train-line")
    return rows / 10

@dsl.pipeline(name="cached-cli")
def cached_cli(n: int = 7):
    train(rows=load(n=n).output)
'''


def _kflab(project: Path, *args: str):
    return run_kflab("--state", str(project / "state"), *args, cwd=project, timeout=300)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A first run (misspelt, as the learner did) that runs both tasks and fills the cache."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    first = _kflab(tmp_path, "pipeline", "run", "pipeline.py", "--name", "frist-run")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "task train SUCCEEDED" in first.stdout
    return tmp_path


def _record(project: Path, name: str) -> dict:
    return json.loads((project / "state" / "resources" / "pipelineruns" / "default" /
                       f"{name}.json").read_text())


# how the second run is answered: `--name=first-run` is a form the fast path leaves to the
# normal path (which replays from the memo); without the memo the engine runs, every task a
# cache hit
WAYS = {"fast path": ("--name", "first-run"), "replay": ("--name=first-run",),
        "engine": ("--name", "first-run")}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_cached_rerun_lists_counts_describes_and_logs_its_tasks(project: Path,
                                                                  way: str) -> None:
    if way == "engine":
        shutil.rmtree(project / "state" / "pipeline-replay")
    run = _kflab(project, "pipeline", "run", "pipeline.py", *WAYS[way])
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line.split("s ", 1)[-1].strip() for line in run.stdout.splitlines()]
    assert lines == ["pipeline run first-run: 2 tasks",
                     "task load SKIPPED (cached, from run frist-run)",
                     "task train SKIPPED (cached, from run frist-run)",
                     "pipelinerun/first-run SUCCEEDED"], run.stdout
    tasks = _record(project, "first-run")["status"]["run_details"]["task_details"]
    assert [(t["display_name"], t["state"], t["cached"]) for t in tasks] == [
        ("load", "SKIPPED", True), ("train", "SKIPPED", True)]
    frist = _record(project, "frist-run")["status"]["run_id"]
    assert [t["cached_from"] for t in tasks] == [
        {"run": "frist-run", "run_id": frist, "task": name} for name in ("load", "train")]

    got = _kflab(project, "get", "run", "first-run")
    assert got.returncode == 0, got.stderr
    header, row = got.stdout.splitlines()[:2]
    assert row.split()[header.split().index("TASKS")] == "2", got.stdout

    described = _kflab(project, "describe", "run", "first-run")
    assert described.returncode == 0, described.stderr
    assert "at most 0" not in described.stdout
    assert "no task ran: 2 reused from the cache (SKIPPED, cached)" in described.stdout
    assert "task train SKIPPED (cached, from run frist-run)" in described.stdout

    logs = _kflab(project, "logs", "run", "first-run", "--task", "train")
    assert logs.returncode == 0, logs.stderr
    out = logs.stdout.splitlines()
    assert out[0].startswith("kflab: reused from the cache (SKIPPED, cached)")
    assert out[0].endswith("the log below is that of the execution it reused: run "
                           "frist-run, task train"), out[0]
    assert any("unique-train-line" in line for line in out[1:]), logs.stdout
    assert not any("loading" in line for line in out), "another task's lines"
    whole = _kflab(project, "logs", "run", "first-run")
    assert any(line.startswith("[train] ") and "unique-train-line" in line
               for line in whole.stdout.splitlines()), whole.stdout


def test_the_log_outlives_the_run_that_made_it(project: Path) -> None:
    """The reused execution's log is kept with its outputs: deleting its run, or running
    it again under its own name, leaves it reachable."""
    assert _kflab(project, "pipeline", "run", "pipeline.py", "--name", "first-run"
                  ).returncode == 0
    assert _kflab(project, "delete", "run", "frist-run").returncode == 0
    again = _kflab(project, "pipeline", "run", "pipeline.py", "--name", "first-run")
    assert "task train SKIPPED (cached, from run frist-run)" in again.stdout, again.stdout
    logs = _kflab(project, "logs", "run", "first-run", "--task", "train")
    assert logs.returncode == 0, logs.stderr
    assert "run frist-run, task train" in logs.stdout.splitlines()[0]
    assert "unique-train-line" in logs.stdout


def test_a_log_not_kept_is_read_from_its_run_or_said_gone(project: Path) -> None:
    """An execution cached before its log was kept beside it (an older kflab): its lines
    come from its run's log while that run is stored; once it is gone, one line says whose
    log it was and why it is not there, never silence."""
    frist = _record(project, "frist-run")["status"]["run_id"]
    kept = project / "state" / "pipeline-root" / "default" / frist / "train" / "main.log"
    assert kept.is_file()
    kept.unlink()
    assert _kflab(project, "pipeline", "run", "pipeline.py", "--name", "first-run"
                  ).returncode == 0
    logs = _kflab(project, "logs", "run", "first-run", "--task", "train")
    assert "run frist-run, task train" in logs.stdout.splitlines()[0]
    assert "unique-train-line" in logs.stdout
    assert _kflab(project, "delete", "run", "frist-run").returncode == 0
    gone = _kflab(project, "logs", "run", "first-run", "--task", "train")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.splitlines() == [
        "kflab: reused from the cache (SKIPPED, cached): its outputs come from run "
        "frist-run, task train, whose log is gone (that run was deleted or run again)"]
