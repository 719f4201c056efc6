"""Facts about the Kubeflow Trainer the lab installs that both backends apply to a TrainJob."""

from __future__ import annotations

from typing import Any

TRAINER_VERSION = "v2.1.0"  # the Trainer kubeflow/manifests 26.03 installs (versions.yaml)


def refuse_newer_fields(spec: Any, error: Any, where: str = "spec") -> None:
    """A TrainJob field the lab's Trainer does not have, written by a newer Kubeflow SDK:
    `spec.runtimePatches` (Trainer v2.3's TrainJob; kubeflow 0.5.0's RuntimePatch option,
    which needs kubeflow-trainer-api >= 2.3). Trainer v2.1.0's CRD has no such field
    (pkg/apis/trainer/v1alpha1/trainjob_types.go TrainJobSpec at v2.1.0), so the API
    server would drop it and the job would run unpatched: refused, naming the version.
    `error(field, message, hint)` builds the error."""
    if isinstance(spec, dict) and "runtimePatches" in spec:
        raise error(f"{where}.runtimePatches",
                    f"Kubeflow Trainer {TRAINER_VERSION} (the lab's) has no runtimePatches "
                    "(added in Trainer v2.3; the Kubeflow SDK's RuntimePatch option writes "
                    "it): it would be dropped and the job run unpatched",
                    f"leave RuntimePatch out; with Trainer {TRAINER_VERSION}, set the "
                    "nodes' pod fields in spec.podTemplateOverrides")
