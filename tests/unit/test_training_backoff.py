"""The replica counts of a PyTorchJob (or TFJob) that fails, as the Training Operator v1.9.0
leaves them (issue 33 Why 8).

pkg/controller.v1/common/job.go ReconcileJobs: a job whose pods' restart counts reach
runPolicy.backoffLimit (pkg/core/job.go PastBackoffLimit: the restart counts of Running pods,
restartPolicy OnFailure/Always/ExitCode) is failed in the jobExceedsLimit branch, which
writes the replicaStatuses the previous reconcile counted -- the failing pod was Running,
restarting in place, so it is active, and the other replicas are as they were -- and, the
job finished, later reconciles leave a failed job's counts alone (only a succeeded job's
active replicas become succeeded). With restartPolicy Never the failing reconcile itself
counts the pods (pytorch/pytorchjob_controller.go UpdateJobStatus): that replica is failed.
cleanPodPolicy None (the PyTorchJob default) deletes no pod, so the workers count active."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.backends.local.training import run as training_run

FAIL = [sys.executable, "-c", "import sys; sys.exit(1)"]
SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def job(kind: str, restart: str, backoff: int | None = 2) -> dict:
    key, lead, worker, cname = {
        "PyTorchJob": ("pytorchReplicaSpecs", "Master", "Worker", "pytorch"),
        "TFJob": ("tfReplicaSpecs", "Chief", "Worker", "tensorflow")}[kind]

    def rep(n: int, command: list[str], policy: str) -> dict:
        return {"replicas": n, "restartPolicy": policy, "template": {"spec": {
            "containers": [{"name": cname, "image": "python:3.11", "command": command}]}}}

    spec: dict = {key: {lead: rep(1, FAIL, restart), worker: rep(2, SLEEP, "OnFailure")}}
    if backoff is not None:
        spec["runPolicy"] = {"backoffLimit": backoff}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "bad"},
            "spec": spec}


def _counts(obj: dict) -> dict:
    return {t: {k: v for k, v in s.items() if k in ("active", "succeeded", "failed")}
            for t, s in obj["status"]["replicaStatuses"].items()}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubelet's restart back-off shortened, and the grace stragglers get under cleanPodPolicy
    None (the workers sleep): both only make the test wait."""
    monkeypatch.setattr(training_run, "RESTART_DELAY", (0.05, 0.05))
    monkeypatch.setattr(training_run, "CLEAN_NONE_GRACE", 0.2)


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob"])
def test_the_backoff_limit_leaves_the_counts_of_the_reconcile_before(
        kind: str, state: Path, tmp_path: Path) -> None:
    out = LocalBackend(str(state)).apply(job(kind, "OnFailure"), base_dir=tmp_path)
    lead = "Master" if kind == "PyTorchJob" else "Chief"
    failed = out["status"]["conditions"][-1]
    assert (failed["type"], failed["status"]) == ("Failed", "True")
    assert failed["message"] == \
        "Job bad has failed because it has reached the specified backoff limit"
    assert _counts(out) == {lead: {"active": 1}, "Worker": {"active": 2}}
    assert out["status"]["completionTime"]


def test_restart_policy_never_counts_the_failed_pod(state: Path, tmp_path: Path) -> None:
    out = LocalBackend(str(state)).apply(job("PyTorchJob", "Never", None), base_dir=tmp_path)
    assert out["status"]["conditions"][-1]["message"] == \
        "PyTorchJob bad is failed because 1 Master replica(s) failed."
    assert _counts(out) == {"Master": {"failed": 1}, "Worker": {"active": 2}}
