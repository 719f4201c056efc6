"""Local PyTorchJob objects (spec as defaulted, status as written) validate against the
upstream PyTorchJob CRD's openAPIV3Schema (Draft 4), and hold no field the API server would
prune. Skips when ../shared (the kubeflow/manifests copy) is absent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from crds import crd_schema, schema_errors

from lab.backends.local import LocalBackend


def pruned(obj: Any, schema: dict, path: str = "") -> list[str]:
    """Fields a structural schema does not declare (the API server would drop them)."""
    out: list[str] = []
    if isinstance(obj, dict) and schema.get("type") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return out
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in obj.items():
            if path == "" and key == "metadata":  # ObjectMeta: the API server's own schema
                continue
            if props is not None and key in props:
                out += pruned(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += pruned(value, extra, f"{path}.{key}")
            else:
                out.append(f"{path}.{key}")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            out += pruned(item, schema["items"], f"{path}[{i}]")
    return out


@pytest.fixture
def schema(shared: Path) -> dict:
    return crd_schema(shared, "PyTorchJob")


def job(name: str, code: str, policy: str = "Never", **spec) -> dict:
    rs = {"replicas": 1, "restartPolicy": policy, "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "pytorch/pytorch", "command": [sys.executable, "-c", code]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": rs, "Worker": dict(rs)}, **spec}}


def test_statuses_validate_against_the_crd(schema: dict, state: Path, tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    objs = [
        backend.apply(job("ok", "pass", nprocPerNode="1"), base_dir=tmp_path),
        backend.apply(job("bad", "raise SystemExit(1)", runPolicy={"backoffLimit": 1}),
                      base_dir=tmp_path),
        backend.apply(job("elastic", "pass", "OnFailure",
                          elasticPolicy={"minReplicas": 1, "maxReplicas": 2}),
                      base_dir=tmp_path),
    ]
    assert [o["status"]["conditions"][-1]["type"] for o in objs] == [
        "Succeeded", "Failed", "Succeeded"]
    for obj in objs:
        assert schema_errors(schema, obj) == []
        assert pruned(obj, schema) == []


def test_the_checker_catches_a_bad_status(schema: dict) -> None:
    """The validation above can fail: a wrong type and an undeclared field are caught."""
    bad = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"},
           "spec": {"pytorchReplicaSpecs": {}},
           "status": {"replicaStatuses": {"Master": {"active": "one"}}, "phase": "Done"}}
    assert schema_errors(schema, bad)
    assert pruned(bad, schema) == [".status.phase"]


def test_trainjob_statuses_validate_against_the_crd(shared: Path, state: Path,
                                                    tmp_path: Path) -> None:
    """A local TrainJob, as stored (defaults and status), against Trainer v2.1's CRD."""
    schema = crd_schema(shared, "TrainJob")
    backend = LocalBackend(str(state))
    obj = backend.apply({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
                 "trainer": {"numNodes": 2, "command": [sys.executable, "-c", "pass"]}}},
        base_dir=tmp_path)
    assert obj["status"]["conditions"][-1]["type"] == "Complete"
    assert schema_errors(schema, obj) == []
    assert pruned(obj, schema) == []
