"""Process ownership with real `kflab` processes and real signals (no mocks): every process
kflab starts is recorded and stopped from any terminal; a dead owner (SIGKILL, closed
terminal) is noticed by the next command; one writer per resource."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tuning_helpers import TRIAL, experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.procs import is_running

REPO = Path(__file__).resolve().parents[2]
# Each trial records its pid and its grandchild's, then runs for a minute.
LONG_TRIAL = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(os.environ["KATIB_TRIAL_NAME"] + ".pids", "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""
NAP_PIPELINE = """
from kfp import dsl

@dsl.component
def nap(seconds: int) -> str:
    import os, time
    open(os.environ["PIDFILE"], "w").write(str(os.getpid()))
    time.sleep(seconds)
    return "done"

@dsl.pipeline
def napping(seconds: int = 60):
    nap(seconds=seconds)
"""


def env_for(state: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO), **extra}


def kflab(state: Path, *args: str, cwd: Path | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=cwd,
                          env=env_for(state, COLUMNS="200"), capture_output=True, text=True,
                          timeout=timeout, check=False)


def start(state: Path, cwd: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lab.cli", *args], cwd=cwd,
                            env=env_for(state, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for(fn, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if value := fn():
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def running_experiment(tmp_path: Path, trials: int = 2) -> tuple[subprocess.Popen[str], list]:
    """`kflab apply` of an Experiment whose trials (and their children) are all up."""
    write(tmp_path, "trial.py", LONG_TRIAL)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(
        experiment(maxTrialCount=4, parallelTrialCount=trials)))
    cli = start(tmp_path / "state", tmp_path, "apply", "-f", "exp.yaml")
    wait_for(lambda: len(list(tmp_path.glob("*.pids"))) == trials)
    time.sleep(0.2)  # the files are written; let the pids land in them
    pids = [int(p) for f in tmp_path.glob("*.pids") for p in f.read_text().split()]
    assert len(pids) == 2 * trials and all(is_running(p) for p in pids)
    return cli, pids


def gone(pids: list[int]) -> bool:
    return not any(is_running(p) for p in pids)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_dead_owner_is_noticed_and_its_trials_stopped(tmp_path: Path, sig: int) -> None:
    """SIGKILL (nothing runs in kflab) or SIGHUP (a closed terminal) during `kflab apply`:
    no trial is left running and the status does not stay Running."""
    cli, pids = running_experiment(tmp_path)
    cli.send_signal(sig)
    cli.communicate(timeout=30)
    state = tmp_path / "state"
    res = kflab(state, "get", "experiment", "exp", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert wait_for(lambda: gone(pids), timeout=10)
    exp = yaml.safe_load(res.stdout)
    last = exp["status"]["conditions"][-1]
    assert last["type"] == "Failed"
    if sig == signal.SIGKILL:
        assert f"pid {cli.pid}" in last["message"] and "ended without finishing" in last["message"]
        assert "stopped 4 leftover process(es)" in last["message"]
    else:  # kflab itself cleaned up and said why
        assert "SIGHUP" in last["message"]
    trials = LocalBackend(str(state)).list("Trial")
    assert trials and all(t["status"]["conditions"][-1]["type"] == "Killed" for t in trials)


def test_delete_from_another_terminal_stops_a_running_experiment(tmp_path: Path) -> None:
    """The experiment is stopped, its trials too, and it does not reappear afterwards."""
    cli, pids = running_experiment(tmp_path)
    state = tmp_path / "state"
    res = kflab(state, "delete", "experiment", "exp")
    assert res.returncode == 0, res.stdout + res.stderr
    out, _ = cli.communicate(timeout=30)
    assert cli.returncode == 128 + signal.SIGTERM, out
    assert "kflab delete" in out
    assert gone(pids)
    time.sleep(0.5)
    backend = LocalBackend(str(state))
    assert backend.get("Experiment", "exp") is None and backend.list("Trial") == []


def test_down_from_another_terminal_stops_it_and_the_status_says_so(tmp_path: Path) -> None:
    cli, pids = running_experiment(tmp_path)
    state = tmp_path / "state"
    res = kflab(state, "down")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "experiment/default/exp" in res.stdout
    cli.communicate(timeout=30)
    assert gone(pids)
    last = LocalBackend(str(state)).get("Experiment", "exp")["status"]["conditions"][-1]
    assert last["type"] == "Failed" and "kflab down" in last["message"]
    assert "SIGTERM" in last["message"]


def test_second_apply_of_the_same_experiment_fails_fast(tmp_path: Path) -> None:
    """One writer per resource: the second apply names the first one's pid, exits 2 at
    once, and the first ends with exactly maxTrialCount trials."""
    write(tmp_path, "trial.py", TRIAL)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment(maxTrialCount=2)))
    state = tmp_path / "state"
    first = start(state, tmp_path, "apply", "-f", "exp.yaml", TRIAL_SLEEP="1.5")
    owner = state / "owners" / "experiments" / "default" / "exp.json"
    wait_for(owner.exists)
    t0 = time.monotonic()
    second = kflab(state, "apply", "-f", "exp.yaml", cwd=tmp_path)
    assert second.returncode == 2, second.stdout + second.stderr
    assert time.monotonic() - t0 < 10
    assert f"pid {first.pid}" in second.stderr and "being run by another kflab" in second.stderr
    assert "Traceback" not in second.stderr
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0, out
    exp = LocalBackend(str(state)).get("Experiment", "exp")
    assert exp["status"]["trials"] == 2 and len(LocalBackend(str(state)).list("Trial")) == 2


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_pipeline_run_leaves_no_task_behind(tmp_path: Path, sig: int) -> None:
    """SIGTERM to `kflab pipeline run`: the task is stopped and the run is CANCELED naming
    the signal. SIGKILL: the next `kflab get` stops the task and marks the run FAILED."""
    (tmp_path / "nap.py").write_text(NAP_PIPELINE)
    pidfile = tmp_path / "task.pid"
    state = tmp_path / "state"
    cli = start(state, tmp_path, "pipeline", "run", "nap.py", "--name", "nap",
                PIDFILE=str(pidfile))
    task = int(wait_for(lambda: pidfile.exists() and pidfile.read_text()))
    cli.send_signal(sig)
    cli.communicate(timeout=30)
    res = kflab(state, "get", "run", "nap", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert wait_for(lambda: not is_running(task), timeout=10)
    run = yaml.safe_load(res.stdout)["status"]
    if sig == signal.SIGTERM:
        assert cli.returncode == 128 + signal.SIGTERM
        assert run["state"] == "CANCELED" and "SIGTERM" in run["error"]["message"]
        # the task was stopped by the cancellation: not "task failed" (issue 23, point 9)
        assert "FAILED" not in {t["state"] for t in run["run_details"]["task_details"]}
        from lab.backends.failures import reason

        assert "SIGTERM" in str(reason({"status": run})) and "failed" not in str(
            reason({"status": run}))
    else:
        assert run["state"] == "FAILED" and "ended without finishing" in run["error"]["message"]
    assert {t["state"] for t in run["run_details"]["task_details"]} != {"RUNNING"}


def test_killed_foreground_job_supervisor_leaves_no_replica(tmp_path: Path) -> None:
    """SIGKILL to `kflab apply` of a PyTorchJob: its replicas (recorded with their start
    time) are stopped by the next command that looks at the job."""
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"},
           "spec": {"pytorchReplicaSpecs": {r: {"replicas": 1, "restartPolicy": "Never",
                                                 "template": {"spec": {"containers": [{
                                                     "name": "pytorch", "image": "pytorch/pytorch",
                                                     "command": [sys.executable, "-c",
                                                                 "import time; time.sleep(60)"
                                                                 ]}]}}}
                                             for r in ("Master", "Worker")}}}
    (tmp_path / "j.yaml").write_text(yaml.safe_dump(job))
    state = tmp_path / "state"
    cli = start(state, tmp_path, "apply", "-f", "j.yaml")
    record = state / "owners" / "pytorchjobs" / "default" / "j.json"
    procs = wait_for(lambda: len((yaml.safe_load(record.read_text()) if record.exists()
                                  else {}).get("procs") or {}) >= 2 and
                     yaml.safe_load(record.read_text())["procs"])
    pids = [rec["pid"] for label, rec in procs.items()]
    cli.kill()
    cli.communicate(timeout=30)
    assert any(is_running(p) for p in pids), "replicas run on once their owner is killed"
    res = kflab(state, "get", "pytorchjob", "j", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert wait_for(lambda: gone(pids), timeout=10)
    last = yaml.safe_load(res.stdout)["status"]["conditions"][-1]
    assert last["type"] == "Failed" and "ended without finishing" in last["message"]
