"""Kinds of the Kubeflow components a lab cluster runs that kflab itself does not (the
Training Operator's JAXJob, MPIJob, PaddleJob, XGBoostJob; Trainer's runtimes) are named as
such, with the command that gives a cluster -- never "unknown resource type" (issue 33 Why 5).
The CRD list is the lab's own: kubeflow/manifests' training-operator CRDs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.kube import kinds

MANIFEST = """\
apiVersion: {api}
kind: {kind}
metadata: {{name: x}}
spec: {{}}
"""
APIS = {"JAXJob": "kubeflow.org/v1", "MPIJob": "kubeflow.org/v1", "PaddleJob": "kubeflow.org/v1",
        "XGBoostJob": "kubeflow.org/v1",
        "ClusterTrainingRuntime": "trainer.kubeflow.org/v1alpha1",
        "TrainingRuntime": "trainer.kubeflow.org/v1alpha1"}


@pytest.mark.parametrize("kind", sorted(APIS))
def test_apply_names_a_cluster_only_kind(kind: str, kflab, state: Path,
                                         tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.format(api=APIS[kind], kind=kind))
    done = kflab("apply", "-f", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    text = " ".join(done.stderr.split())
    named = f"{kind} runs on a cluster only" in text or (
        f"{kind} (" in text and "the local backend does not run" in text)
    assert named and "kflab up" in text, text
    assert "unknown resource type" not in text and "bug in kflab" not in text
    assert not (state / "resources").exists() or not list((state / "resources").rglob("*"))


@pytest.mark.parametrize("name", ["jaxjobs", "mpijob", "PaddleJob", "xgboostjobs",
                                  "clustertrainingruntimes", "trainingruntime"])
def test_get_names_a_cluster_only_kind(name: str, kflab, state: Path) -> None:
    done = kflab("get", name)
    assert done.returncode == 2 and "runs on a cluster only" in done.stderr, done.stderr


def test_the_training_operator_kinds_are_the_ones_the_lab_installs(shared: Path) -> None:
    crds = shared / ("upstream/kubeflow-manifests-26.03/applications/training-operator/"
                     "upstream/base/crds")
    served = {p.name.split("_")[1].removesuffix(".yaml") for p in crds.glob("kubeflow.org_*")}
    assert len(served) == 6, served
    run_here = {k.plural for k in kinds.KINDS}
    cluster_only = {names[0] for names, _ in kinds.CLUSTER_ONLY.values()}
    assert served - run_here == served & cluster_only, served
