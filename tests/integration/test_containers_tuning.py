"""A Katib Experiment whose trial image kflab does not run as a process: trials are real
containers (podman), two at a time, each writing its metrics file at the File collector's
absolute path inside its container -- a private host folder mounted there, so nothing
needs root on the host and side-by-side trials never share the file -- and the statuses
are read back as Katib writes them, validated as the other Katib tests validate them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest
import yaml
from containers_helpers import PYTHON, inspect_labels, leftovers, podman, use_podman
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend
from tests.unit.katib_status_schema import EXPERIMENT_STATUS, TRIAL_STATUS

pytestmark = pytest.mark.slow

TRIAL = """\
import argparse, os, sys
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--out")
a = p.parse_args()
with open(a.out, "w") as fh:  # Katib's File collector reads the file once the trial ends
    for epoch in range(3):
        fh.write(f"{{metricName: loss, metricValue: {a.lr * (3 - epoch):.4f}}}\\n")
print("trial", os.environ["KATIB_TRIAL_NAME"], "cwd", os.getcwd(), flush=True)
"""


def experiment(folder: str) -> dict:
    path = f"{folder}/mnist.log"
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
        "metadata": {"name": "filecoll", "namespace": "default"},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random",
                          "algorithmSettings": [{"name": "random_state", "value": "7"}]},
            "parallelTrialCount": 2, "maxTrialCount": 4, "maxFailedTrialCount": 1,
            "metricsCollectorSpec": {
                "source": {"fileSystemPath": {"path": path, "kind": "File"},
                           # the filter of Katib's examples/v1beta1/metrics-collector/
                           # file-metrics-collector.yaml
                           "filter": {"metricsFormat": [
                               r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"]}},
                "collector": {"kind": "File"}},
            "parameters": [{"name": "lr", "parameterType": "double",
                            "feasibleSpace": {"min": "0.01", "max": "0.05"}}],
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "trialParameters": [{"name": "learningRate", "reference": "lr"}],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                    "spec": {"restartPolicy": "Never", "containers": [{
                        "name": "training-container", "image": PYTHON,
                        "command": ["python3", "trial.py",
                                    "--lr=${trialParameters.learningRate}", f"--out={path}"],
                    }]}}}}}}}


def test_file_collector_trials_run_in_containers(state: Path, tmp_path: Path, shared: Path,
                                                 monkeypatch) -> None:
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "trial.py").write_text(TRIAL)
    folder = f"/katib-{uuid.uuid4().hex[:8]}"  # nothing of it may appear on the host
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    exp = backend.apply(experiment(folder), base_dir=tmp_path)
    trials = [t for t in backend.list("Trial") if t["metadata"]["labels"][
        "katib.kubeflow.org/experiment"] == "filecoll"]
    detail = [(t["metadata"]["name"], t["status"]["conditions"][-1]) for t in trials]
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached", detail
    assert exp["status"]["trialsSucceeded"] == 4
    assert len(trials) == 4
    for trial in trials:
        lr = float(trial["spec"]["parameterAssignments"][0]["value"])
        metric = trial["status"]["observation"]["metrics"][0]
        # each trial read its own file: min is lr*1, latest the last line, max lr*3
        assert metric["name"] == "loss"
        assert float(metric["min"]) == pytest.approx(lr, abs=1e-4)
        assert float(metric["max"]) == pytest.approx(3 * lr, abs=1e-4)
        assert float(metric["latest"]) == pytest.approx(lr, abs=1e-4)
        log = list(backend.logs("Trial", trial["metadata"]["name"]))
        assert log == [f"trial {trial['metadata']['name']} cwd /kflab/work"]
        jsonschema.Draft4Validator(TRIAL_STATUS).validate(trial["status"])
        assert schema_errors(crd_schema(shared, "Trial"), trial) == []
    # two trials ran side by side (Katib's parallelTrialCount), each with its own file:
    # no file-parallel difference is announced, as none is made
    started = [e for e in events if e["event"] == "trial-started"]
    assert len(started) == 4
    notes = exp["metadata"].get("annotations", {})
    assert "katib.collector.file-parallel" not in notes.get("kflab.dev/local-differences", "")
    best = exp["status"]["currentOptimalTrial"]
    assert best["bestTrialName"] == min(
        trials, key=lambda t: float(t["spec"]["parameterAssignments"][0]["value"])
    )["metadata"]["name"]
    jsonschema.Draft4Validator(EXPERIMENT_STATUS).validate(exp["status"])
    assert schema_errors(crd_schema(shared, "Experiment"), exp) == []
    assert not os.path.exists(folder)
    assert leftovers(state) == {"containers": [], "networks": []}


def test_trial_containers_carry_the_owner_labels_and_go_with_delete(state: Path,
                                                                    tmp_path: Path,
                                                                    monkeypatch) -> None:
    """A running trial's container is labelled with its owner, so `kflab delete` from
    another process removes it (its run client is stopped with the experiment)."""
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "trial.py").write_text("import time\nprint('up', flush=True)\n"
                                       "time.sleep(300)\n")
    obj = experiment("/katib")
    c = obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    c["command"] = ["python3", "trial.py"]
    c["args"] = ["${trialParameters.learningRate}"]
    obj["spec"]["parallelTrialCount"] = 1
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(obj))
    env = {**os.environ, "KFLAB_STATE": str(state)}
    apply = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f",
                              str(tmp_path / "exp.yaml")], env=env, cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        running: list[str] = []
        while time.monotonic() < deadline and not running:
            running = leftovers(state)["containers"]
            time.sleep(0.5)
        assert running, "no trial container started"
        labels = inspect_labels(running[0])
        assert labels["dev.kflab.owner"].startswith("Trial/default/filecoll-")
        assert labels["dev.kflab.run"].startswith("experiments.default.filecoll.")
        done = subprocess.run([sys.executable, "-m", "lab.cli", "delete", "experiment",
                               "filecoll"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert apply.wait(timeout=60) != 0
    finally:
        if apply.poll() is None:
            apply.kill()
    assert leftovers(state) == {"containers": [], "networks": []}
    assert podman("ps", "-a", "--filter", f"name={running[0]}", "--format",
                  "{{.Names}}").stdout.strip() == ""


JOB_TRIAL = """\
import os, socket, sys, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
lr = float(sys.argv[1])
if os.environ["RANK"] == "0":
    srv = socket.create_server(("0.0.0.0", port))
    conn, _ = srv.accept()
    got = conn.recv(64).decode()
    print(f"worker said {got}", flush=True)
    print(f"loss={lr * 2:.4f}", flush=True)
else:
    for _ in range(600):
        try:
            s = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(b"hello")
"""


def test_pytorchjob_trials_run_their_replicas_in_containers(state: Path, tmp_path: Path,
                                                            shared: Path,
                                                            monkeypatch) -> None:
    """A trial whose trialSpec is a PyTorchJob: every replica a container in the trial's
    own network, the Master's output what the StdOut collector reads."""
    use_podman(monkeypatch, PYTHON)
    (tmp_path / "job.py").write_text(JOB_TRIAL)

    def spec() -> dict:
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": PYTHON,
            "command": ["python3", "job.py", "${trialParameters.learningRate}"]}]}}}

    exp = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
           "metadata": {"name": "jobtrials", "namespace": "default"},
           "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                    "algorithm": {"algorithmName": "random"},
                    "parallelTrialCount": 2, "maxTrialCount": 2,
                    "parameters": [{"name": "lr", "parameterType": "double",
                                    "feasibleSpace": {"min": "0.01", "max": "0.05"}}],
                    "trialTemplate": {
                        "primaryContainerName": "pytorch",
                        "trialParameters": [{"name": "learningRate", "reference": "lr"}],
                        "trialSpec": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                      "spec": {"pytorchReplicaSpecs": {
                                          "Master": spec(), "Worker": spec()}}}}}}
    backend = LocalBackend(str(state))
    exp = backend.apply(exp, base_dir=tmp_path)
    trials = [t for t in backend.list("Trial") if t["metadata"]["labels"][
        "katib.kubeflow.org/experiment"] == "jobtrials"]
    assert exp["status"].get("trialsSucceeded") == 2, [t["status"] for t in trials]
    for trial in trials:
        lr = float(trial["spec"]["parameterAssignments"][0]["value"])
        metric = trial["status"]["observation"]["metrics"][0]
        assert float(metric["latest"]) == pytest.approx(2 * lr, abs=1e-4)
        assert "worker said hello" in "\n".join(backend.logs("Trial",
                                                             trial["metadata"]["name"]))
        jsonschema.Draft4Validator(TRIAL_STATUS).validate(trial["status"])
    assert schema_errors(crd_schema(shared, "Experiment"), exp) == []
    assert leftovers(state) == {"containers": [], "networks": []}
