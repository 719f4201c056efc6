"""Refusals the upstream examples' sweep (scripts/fidelity_sweep.py) found unclear, each with
a reason a user can act on. The manifests are the shapes of upstream examples:
- Training Operator v1.9.2 examples/xgboost/xgboostjob.yaml (and MPIJob, PaddleJob, JAXJob):
  a kind the lab's cluster runs and the local backend does not;
- examples/pytorch/elastic/etcd.yaml, KServe v0.16.0 docs/samples/v1beta1/custom/torchserve/
  pvc.yaml: Kubernetes' own objects beside an example;
- KServe docs/samples/v1beta1/sklearn/v1/perf.yaml: a Job with generateName (for `kubectl
  create`; `kubectl apply` refuses it: "cannot use generate name with apply")."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.errors import LabError
from lab.kube.manifests import load_manifests


def _refusal(tmp_path: Path, obj: dict) -> str:
    with pytest.raises(LabError) as err:
        LocalBackend(str(tmp_path / "state")).validate(obj, base_dir=tmp_path)
    return f"{err.value} {err.value.hint}"


@pytest.mark.parametrize("kind", ["XGBoostJob", "MPIJob", "PaddleJob", "JAXJob"])
def test_a_training_operator_kind_not_run_locally_says_where_it_runs(tmp_path: Path,
                                                                    kind: str) -> None:
    text = _refusal(tmp_path, {"apiVersion": "kubeflow.org/v1", "kind": kind,
                               "metadata": {"name": "j"}, "spec": {}})
    assert f"{kind} (kubeflow.org/v1) is a Training Operator kind" in text
    assert "PyTorchJob, TFJob and TrainJob" in text and "kflab up" in text
    assert "unknown resource type" not in text


@pytest.mark.parametrize("kind", ["Service", "PersistentVolumeClaim", "Pod", "Deployment"])
def test_a_kubernetes_object_says_it_is_not_needed_locally(tmp_path: Path, kind: str) -> None:
    text = _refusal(tmp_path, {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}})
    assert f"a Kubernetes {kind} is cluster plumbing" in text
    assert f"leave the {kind} out locally" in text


def test_an_unknown_kind_is_still_unknown(tmp_path: Path) -> None:
    text = _refusal(tmp_path, {"apiVersion": "x.io/v1", "kind": "Gadget",
                               "metadata": {"name": "x"}})
    assert "unknown resource type 'Gadget'" in text


def test_generate_name_is_named_with_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "perf.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: load-test\n"
                 "spec: {}\n")
    with pytest.raises(LabError) as err:
        load_manifests(f)
    assert err.value.field == "metadata.name"
    assert "generateName ('load-test') is for `kubectl create`" in str(err.value)
    assert "load-test-1" in (err.value.hint or "")
