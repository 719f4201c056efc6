"""A Katib trial whose trialSpec is a TrainJob runs every node as the Trainer does, and its
metrics come from node 0, as Katib v0.19.0 reads them.

Upstream: Katib's examples/v1beta1/kubeflow-trainer/trainjob-pytorch.yaml (a TrainJob on the
torch-distributed runtime, numNodes 2, primaryContainerName node). Katib v0.19.0 defaults such
a trial's success and failure conditions to the TrainJob's Complete / Failed and its primary
pod to node index 0 (pkg/apis/controller/experiments/v1beta1/experiment_defaults.go
setDefaultTrialTemplate, constants.go DefaultTrainJobSuccessCondition,
DefaultTrainJobPrimaryPodLabels); the trial controller ends the trial on those conditions
(pkg/controller.v1beta1/trial/trial_controller_util.go UpdateTrialStatusCondition). The
scripts print what they got from the environment, no ML stack (seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tuning_helpers import experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.tuning import spec as tuning_spec
from lab.errors import LabError

# Each node prints its own loss; only node 0's may reach the trial (Katib's primary pod).
SCRIPT = """
import os, sys
rank, nodes = int(os.environ["PET_NODE_RANK"]), int(os.environ["PET_NNODES"])
assert os.environ["PET_MASTER_ADDR"] and int(os.environ["PET_MASTER_PORT"]) > 0
x = float(sys.argv[1])
print(f"node={rank} nodes={nodes}")
print(f"loss={x + 100 * rank:.4f}")
sys.exit(int(os.environ.get("FAIL_NODE", "-1")) == rank)
"""


def _trainjob_experiment(env: list[dict[str, str]] | None = None,
                         primary: str = "node") -> dict:
    trainer: dict = {"numNodes": 2,
                     "command": [sys.executable, "job.py", "${trialParameters.x}"]}
    if env:
        trainer["env"] = env
    obj = experiment(maxTrialCount=2, parallelTrialCount=1, maxFailedTrialCount=1)
    obj["spec"]["parameters"] = obj["spec"]["parameters"][:1]
    obj["spec"]["trialTemplate"] = {
        "primaryContainerName": primary,
        "trialParameters": [{"name": "x", "reference": "x"}],
        "trialSpec": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                      "spec": {"runtimeRef": {"name": "torch-distributed"},
                               "trainer": trainer}}}
    return obj


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(str(tmp_path / "state"))


def test_trainjob_trial_runs_every_node_and_reads_node_0(backend: LocalBackend,
                                                        tmp_path: Path) -> None:
    write(tmp_path, "job.py", SCRIPT)
    exp = backend.apply(_trainjob_experiment(), base_dir=tmp_path)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    trials = backend.list("Trial")
    assert len(trials) == 2
    for trial in trials:
        assert trial["status"]["conditions"][-1]["type"] == "Succeeded"
        assert trial["spec"]["runSpec"]["kind"] == "TrainJob"
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        loss = next(m for m in trial["status"]["observation"]["metrics"]
                    if m["name"] == "loss")
        assert float(loss["latest"]) == pytest.approx(x, abs=1e-3)  # node 0's, not node 1's
        folder = backend.root / "runs" / "trials" / "default" / trial["metadata"]["name"]
        assert "node=0 nodes=2" in (folder / "trial.log").read_text()
        assert "node=1 nodes=2" in (folder / "node-1.log").read_text()


def test_a_failed_node_fails_the_trial(backend: LocalBackend, tmp_path: Path) -> None:
    """The TrainJob's Failed condition (a node out of restarts) is the trial's failure."""
    write(tmp_path, "job.py", SCRIPT)
    exp = backend.apply(_trainjob_experiment([{"name": "FAIL_NODE", "value": "1"}]),
                        base_dir=tmp_path)
    assert exp["status"]["conditions"][-1]["type"] == "Failed"
    trial = backend.list("Trial")[0]
    assert trial["status"]["conditions"][-1]["type"] == "Failed"


def test_primary_container_other_than_node_is_refused() -> None:
    """Katib's pod webhook finds no such container in the node pod: named at apply."""
    with pytest.raises(LabError) as err:
        tuning_spec.parse(_trainjob_experiment(primary="training-container"))
    assert "primaryContainerName" in str(err.value) and "node" in str(err.value)


def test_trainjob_trial_of_another_api_version_is_refused() -> None:
    obj = _trainjob_experiment()
    obj["spec"]["trialTemplate"]["trialSpec"]["apiVersion"] = "kubeflow.org/v1"
    with pytest.raises(LabError) as err:
        tuning_spec.parse(obj)
    assert "trainer.kubeflow.org/v1alpha1" in str(err.value)
