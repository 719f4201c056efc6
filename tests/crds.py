"""Upstream CRD schemas from ../shared/upstream, for validating what the local backend writes.

One loader for every kind, so each test validates the same way: the CRD's openAPIV3Schema
of the served version, with jsonschema's Draft 4 validator (Draft 2020-12 rejects the
boolean exclusiveMinimum these schemas use)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

APPS = Path("upstream/kubeflow-manifests-26.03/applications")
CRD_FILES = {
    "PyTorchJob": APPS / "training-operator/upstream/base/crds/kubeflow.org_pytorchjobs.yaml",
    "TFJob": APPS / "training-operator/upstream/base/crds/kubeflow.org_tfjobs.yaml",
    "Notebook": APPS / "jupyter/notebook-controller/upstream/crd/bases/kubeflow.org_notebooks.yaml",
    "Experiment": APPS / "katib/upstream/components/crd/experiment.yaml",
    "Trial": APPS / "katib/upstream/components/crd/trial.yaml",
    "InferenceService": APPS / "kserve/kserve/kserve.yaml",
    "TrainJob": APPS / "trainer/upstream/base/crds/trainer.kubeflow.org_trainjobs.yaml",
}
TORCH_RUNTIME = APPS / "trainer/upstream/base/runtimes/torch_distributed.yaml"
VERSIONS = {"PyTorchJob": "v1", "TFJob": "v1", "Notebook": "v1", "Experiment": "v1beta1",
            "Trial": "v1beta1", "InferenceService": "v1beta1", "TrainJob": "v1alpha1"}
# Every CRD file the API-server tests load, unchanged: Katib, the Training Operator's
# PyTorchJob and TFJob, the Notebook controller's Notebook, and all the CRDs of KServe's
# release manifest.
CRD_SOURCES = (
    APPS / "katib/upstream/components/crd/experiment.yaml",
    APPS / "katib/upstream/components/crd/trial.yaml",
    APPS / "katib/upstream/components/crd/suggestion.yaml",
    APPS / "training-operator/upstream/base/crds/kubeflow.org_pytorchjobs.yaml",
    APPS / "training-operator/upstream/base/crds/kubeflow.org_tfjobs.yaml",
    APPS / "jupyter/notebook-controller/upstream/crd/bases/kubeflow.org_notebooks.yaml",
    APPS / "kserve/kserve/kserve.yaml",
    APPS / "trainer/upstream/base/crds/trainer.kubeflow.org_trainjobs.yaml",
    APPS / "trainer/upstream/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
    APPS / "trainer/upstream/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
)


@functools.cache
def crd_schema(shared: Path, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of `kind`'s CRD at the version kflab writes."""
    text = (shared / CRD_FILES[kind]).read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for chunk in text.split("\n---\n"):  # kserve.yaml is 3.5 MB: parse only the CRD's part
        if "CustomResourceDefinition" not in chunk or f"kind: {kind}\n" not in chunk:
            continue
        doc = yaml.load(chunk, Loader=loader)
        if doc and doc.get("kind") == "CustomResourceDefinition" and \
                doc["spec"]["names"]["kind"] == kind:
            version = next(v for v in doc["spec"]["versions"] if v["name"] == VERSIONS[kind])
            return version["schema"]["openAPIV3Schema"]
    raise LookupError(f"no {kind} CRD in {CRD_FILES[kind]}")


def crd_documents(shared: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in CRD_SOURCES, exactly as upstream wrote it."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    for rel in CRD_SOURCES:
        for chunk in (shared / rel).read_text().split("\n---\n"):
            if "kind: CustomResourceDefinition" not in chunk:
                continue
            doc = yaml.load(chunk, Loader=loader)
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out.append(doc)
    return out


def schema_errors(schema: dict[str, Any], obj: Any) -> list[str]:
    """Every Draft 4 violation, as 'path: message' lines (empty when valid)."""
    from jsonschema import Draft4Validator

    return [f"{'/'.join(map(str, e.path))}: {e.message}"
            for e in sorted(Draft4Validator(schema).iter_errors(obj), key=str)]
