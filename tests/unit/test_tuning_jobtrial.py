"""A Katib trial whose runSpec is a PyTorchJob runs every replica with the operator's
environment, and its metrics come from the Master (Katib's primary pod), as on a cluster.

Upstream: Katib's pytorchjob-mnist example runs mnist.py in a Master and a Worker
(WORLD_SIZE=2, gloo); the trial ends with the job's condition. The scripts here print
what they got from the environment, no ML stack (seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tuning_helpers import experiment, write

from lab.backends.local import LocalBackend

# Each replica prints its own loss; only the Master's may reach the trial. The Worker
# checks it sees the Master's address and the job's world size, as a gloo rendezvous would.
SCRIPT = """
import os, sys
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert os.environ["MASTER_ADDR"] and int(os.environ["MASTER_PORT"]) > 0
x = float(sys.argv[1])
print(f"rank={rank} world={world}")
print(f"loss={x + 100 * rank:.4f}")
"""


def _pytorchjob_experiment(master_rc: str = "0") -> dict:
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [{
        "name": "pytorch", "image": "pytorch/pytorch",
        "command": [sys.executable, "job.py", "${trialParameters.x}"]}]}}}
    obj = experiment(maxTrialCount=2, parallelTrialCount=1)
    obj["spec"]["parameters"] = obj["spec"]["parameters"][:1]
    obj["spec"]["trialTemplate"] = {
        "primaryContainerName": "pytorch",
        "trialParameters": [{"name": "x", "reference": "x"}],
        "trialSpec": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                      "spec": {"pytorchReplicaSpecs": {"Master": replica,
                                                       "Worker": replica}}}}
    return obj


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(str(tmp_path / "state"))


def test_pytorchjob_trial_runs_every_replica_and_reads_the_master(
        backend: LocalBackend, tmp_path: Path) -> None:
    write(tmp_path, "job.py", SCRIPT)
    exp = backend.apply(_pytorchjob_experiment(), base_dir=tmp_path)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    trials = backend.list("Trial")
    assert len(trials) == 2
    for trial in trials:
        assert trial["status"]["conditions"][-1]["type"] == "Succeeded"
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        loss = next(m for m in trial["status"]["observation"]["metrics"]
                    if m["name"] == "loss")
        assert float(loss["latest"]) == pytest.approx(x, abs=1e-4)  # the Master's, rank 0
        folder = backend.store.run_path("Trial", trial["metadata"]["name"], "default")
        assert "rank=0 world=2" in (folder / "trial.log").read_text()
        assert "rank=1 world=2" in (folder / "worker-0.log").read_text()
        assert "annotations" not in trial["spec"]["runSpec"].get("metadata", {})
    ignored = exp["metadata"].get("annotations", {}).get("kflab.dev/ignored-fields", "")
    assert "only the primary container" not in ignored  # the Worker ran: not left out


def test_a_failing_master_fails_the_trial_with_the_operators_message(
        backend: LocalBackend, tmp_path: Path) -> None:
    write(tmp_path, "job.py",
          SCRIPT.replace('print(f"loss', 'sys.exit(3) if not rank else print(f"loss'))
    exp = backend.apply(_pytorchjob_experiment(), base_dir=tmp_path)
    trials = backend.list("Trial")
    assert trials and all(t["status"]["conditions"][-1]["type"] == "Failed" for t in trials)
    message = trials[0]["status"]["conditions"][-1]["message"]
    assert "PyTorchJob" in message and "Master" in message
    assert exp["status"]["conditions"][-1]["type"] == "Failed"


GPU_SCRIPT = """
import os, sys, time
print("gpus=" + os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
time.sleep(1.0)
print(f"loss={float(sys.argv[1]):.4f}")
"""


def test_parallel_job_trials_get_their_own_gpus(backend: LocalBackend, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: NVML is a MOCK of a two-GPU machine (tests/standins/nvml, as in
    test_gpus.py). Two trials at once, each a PyTorchJob whose Master asks for one GPU:
    each Master gets another GPU, as the scheduler places two pods."""
    from lab.backends.local import gpus
    from tests.standins import nvml

    nvml.install(monkeypatch, nvml.gpus(2))
    write(tmp_path, "job.py", GPU_SCRIPT)
    obj = _pytorchjob_experiment()
    obj["spec"]["parallelTrialCount"] = 2
    specs = obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]
    del specs["Worker"]
    specs["Master"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}}
    exp = backend.apply(obj, base_dir=tmp_path)
    trials = backend.list("Trial")
    assert exp["status"].get("trialsSucceeded") == 2, [
        t["status"]["conditions"][-1]["message"] for t in trials]
    given = {t["metadata"]["annotations"]["kflab.dev/gpus"] for t in trials}
    assert given == {"0", "1"}
    for t in trials:
        log = backend.store.run_path("Trial", t["metadata"]["name"], "default") / "trial.log"
        index = int(t["metadata"]["annotations"]["kflab.dev/gpus"])
        assert f"gpus={nvml.uuid(index)}" in log.read_text()
    assert gpus.holders(backend.root) == {}


def test_ctrl_c_stops_every_replica_of_running_job_trials(tmp_path: Path) -> None:
    """A real `kflab apply` stopped (SIGTERM, as `kflab delete` sends) while a PyTorchJob
    trial runs: Master and Worker are stopped, neither restarts (restartPolicy OnFailure),
    the trial is Killed and the experiment Failed naming the signal."""
    import json
    import os
    import signal
    import subprocess
    import time

    import yaml

    from lab.backends.local.procs import is_running

    script = """
import os, time
with open(f"{os.environ['RANK']}.pid", "a") as fh:  # one line per start
    fh.write(f"{os.getpid()}\\n")
time.sleep(60)
"""
    write(tmp_path, "job.py", script)
    obj = _pytorchjob_experiment()
    for rep in obj["spec"]["trialTemplate"]["trialSpec"]["spec"][
            "pytorchReplicaSpecs"].values():
        rep["restartPolicy"] = "OnFailure"
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(obj))
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "KFLAB_STATE": str(tmp_path / "state"), "PYTHONPATH": str(repo)}
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "exp.yaml"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p) for f in tmp_path.glob("*.pid") for p in f.read_text().split()]
    assert len(pids) == 2, proc.stdout
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, out
    time.sleep(0.3)
    assert [p for p in pids if is_running(p)] == []
    assert sorted(len(f.read_text().split()) for f in tmp_path.glob("*.pid")) == [1, 1], \
        "a replica was started again"
    backend = LocalBackend(str(tmp_path / "state"))
    exp = backend.get("Experiment", "exp")
    assert exp["status"]["conditions"][-1]["type"] == "Failed"
    assert "SIGTERM" in exp["status"]["conditions"][-1]["message"]
    assert [t["status"]["conditions"][-1]["type"] for t in backend.list("Trial")] == ["Killed"]
    for record in (tmp_path / "state" / "owners").rglob("exp.json"):  # if still there
        assert json.loads(record.read_text()).get("procs", {}) == {}


QUICK_THEN_SLOW = """
import os, sys, time
try:
    os.close(os.open("first", os.O_CREAT | os.O_EXCL))
except FileExistsError:
    time.sleep(1.5)  # the other trial's job ends meanwhile
print(f"loss={float(sys.argv[1]):.4f}")
"""


def test_one_job_trial_ending_leaves_the_others_running(backend: LocalBackend,
                                                        tmp_path: Path) -> None:
    """Two job trials at once: the first one's end stops its own replicas only (their
    processes share the experiment's run token; a sweep by it killed the other trial's
    Master, which then failed)."""
    write(tmp_path, "job.py", QUICK_THEN_SLOW)
    obj = _pytorchjob_experiment()
    obj["spec"]["parallelTrialCount"] = 2
    del obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Worker"]
    exp = backend.apply(obj, base_dir=tmp_path)
    trials = backend.list("Trial")
    assert exp["status"].get("trialsSucceeded") == 2, [
        t["status"]["conditions"][-1]["message"] for t in trials]
