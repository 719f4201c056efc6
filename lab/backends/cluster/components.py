"""Whether the cluster has what a scenario requires: each component's API, as served."""

from __future__ import annotations

from typing import Any

from lab.errors import LabError

# component -> (apiVersion, kind) its controller serves, or a Service it runs
SERVED: dict[str, tuple[str, str]] = {
    "katib": ("kubeflow.org/v1beta1", "Experiment"),
    "training": ("kubeflow.org/v1", "PyTorchJob"),
    "trainer": ("trainer.kubeflow.org/v1alpha1", "TrainJob"),  # Kubeflow Trainer v2
    "kserve": ("serving.kserve.io/v1beta1", "InferenceService"),
    "notebooks": ("kubeflow.org/v1", "Notebook"),
}
SERVICES: dict[str, tuple[str, str]] = {"pipelines": ("kubeflow", "ml-pipeline")}


def missing(backend: Any, requires: tuple[str, ...] | list[str]) -> str | None:
    """The first required component the cluster lacks, said plainly; None when all are there."""
    from lab.kube.apierrors import NotServed
    from lab.kube.objects import Ref, get

    for comp in requires:
        if comp in SERVED:
            api, kind = SERVED[comp]
            try:
                backend.kube.resource(api, kind)
            except NotServed:
                return f"{comp} is not installed on the cluster ({kind} {api} is not served)"
        elif comp in SERVICES:
            ns, name = SERVICES[comp]
            try:
                found = get(backend.kube, Ref("v1", "Service", name, ns), missing_ok=True)
            except LabError as exc:
                return f"{comp}: cannot look for Service {ns}/{name}: {exc}"
            if found is None:
                return f"{comp} is not installed on the cluster (no Service {ns}/{name})"
    return None
