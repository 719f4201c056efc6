"""Applying an unchanged training job again changes nothing, as kubectl apply of an unchanged
object (and as an unchanged Katib Experiment here): `unchanged`, nothing re-runs; a changed
manifest runs again. Real runs of one tiny replica per kind; each run appends a line to a
file in the work folder, which is how the test sees whether a replica ran."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.kube.conditions import is_true

SCRIPT = "import sys; open('runs.txt', 'a').write(sys.argv[1] + '\\n')"


def _container(name: str, tag: str) -> dict:
    return {"name": name, "image": "python:3.11", "command": [sys.executable, "-c", SCRIPT, tag]}


def manifest(kind: str, tag: str = "a") -> dict:
    if kind == "TrainJob":
        return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "job"},
                "spec": {"runtimeRef": {"name": "torch-distributed"},
                         "trainer": {"command": [sys.executable, "-c", SCRIPT, tag]}}}
    key, rtype, cname = {"PyTorchJob": ("pytorchReplicaSpecs", "Master", "pytorch"),
                         "TFJob": ("tfReplicaSpecs", "Worker", "tensorflow")}[kind]
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "job"},
            "spec": {key: {rtype: {"replicas": 1, "template": {"spec": {
                "containers": [_container(cname, tag)]}}}}}}


def _done(obj: dict) -> bool:
    status = obj.get("status") or {}
    return is_true(status, "Succeeded") or is_true(status, "Complete")


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob", "TFJob"])
def test_an_unchanged_job_applied_again_does_not_run_again(kind: str, state: Path,
                                                           tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    first = backend.apply(manifest(kind), base_dir=tmp_path)
    assert backend.last_apply == "created" and _done(first), first.get("status")
    assert (tmp_path / "runs.txt").read_text() == "a\n"
    again = backend.apply(manifest(kind), base_dir=tmp_path)
    assert backend.last_apply == "unchanged"
    assert again["status"] == first["status"]
    assert (tmp_path / "runs.txt").read_text() == "a\n"  # nothing re-ran
    changed = backend.apply(manifest(kind, "b"), base_dir=tmp_path)
    assert backend.last_apply == "configured" and _done(changed)
    assert (tmp_path / "runs.txt").read_text() == "a\nb\n"
    backend.delete(kind, "job")
    backend.apply(manifest(kind, "b"), base_dir=tmp_path)  # deleted, then applied: runs
    assert backend.last_apply == "created"
    assert (tmp_path / "runs.txt").read_text() == "a\nb\nb\n"
