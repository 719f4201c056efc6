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


def _pipeline_refusal(tmp_path: Path, source: str) -> LabError:
    from lab.backends.shapes import pipeline_run_manifest

    (tmp_path / "p.py").write_text(source)
    with pytest.raises(LabError) as err:
        LocalBackend(str(tmp_path / "state")).apply(pipeline_run_manifest("p.py", "p"),
                                                    base_dir=tmp_path)
    return err.value


def test_a_pipeline_importing_kfp_kubernetes_says_it_needs_a_cluster(tmp_path: Path) -> None:
    """KFP 2.16.0 samples/core/kubernetes_pvc/kubernetes_pvc.py: `from kfp import
    kubernetes` without kfp-kubernetes installed (it is not, in kflab's environment)."""
    pytest.importorskip("kfp")
    try:
        import kfp.kubernetes  # noqa: F401
        pytest.skip("kfp-kubernetes is installed here")
    except ImportError:
        pass
    err = _pipeline_refusal(tmp_path, "from kfp import dsl, kubernetes\n")
    assert "imports kfp.kubernetes" in str(err) and "cluster" in (err.hint or "")


def test_a_pipeline_importing_a_missing_module_names_it(tmp_path: Path) -> None:
    err = _pipeline_refusal(tmp_path, "import kflab_no_such_module_xyz\n")
    assert "no module named 'kflab_no_such_module_xyz'" in str(err)
    assert "pip install" in (err.hint or "")


@pytest.mark.parametrize("predictor", [
    {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "file:///tmp/m"}},
    {"containers": [{"name": "kserve-container", "image": "kserve/custom-model:latest"}]},
])
def test_a_transformer_says_what_it_is_and_how_to_serve_without_it(tmp_path: Path,
                                                                  predictor: dict) -> None:
    """KServe v0.16.0 docs/samples/v1beta1/transformer/*: both predictor kinds say the same."""
    text = _refusal(tmp_path, {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "t"},
        "spec": {"predictor": predictor, "transformer": {"containers": [
            {"name": "kserve-container", "image": "kserve/image-transformer:latest"}]}}})
    assert "a transformer is not run on the local backend" in text
    assert "remove it to serve the predictor alone" in text
