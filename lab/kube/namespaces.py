"""The lab namespace: created and labelled by kflab, idempotently (server-side apply).

Katib injects its metrics collector only into pods of namespaces labelled
`katib.kubeflow.org/metrics-collector-injection: enabled` (its webhook's namespaceSelector),
so the namespace where scenarios run carries that label.
"""

from __future__ import annotations

from typing import Any

from lab.kube.names import check_label, check_namespace
from lab.kube.objects import MANAGER_SCENARIO, apply

KATIB_INJECTION = ("katib.kubeflow.org/metrics-collector-injection", "enabled")
LAB_LABELS: dict[str, str] = {KATIB_INJECTION[0]: KATIB_INJECTION[1],
                              "app.kubernetes.io/managed-by": "kflab"}


def ensure_namespace(kube: Any, name: str, labels: dict[str, str] | None = None, *,
                     manager: str = MANAGER_SCENARIO) -> dict[str, Any]:
    """Create `name` (or leave it) with `labels` owned by `manager`; returns the Namespace.

    Server-side apply: running it again changes nothing, and labels that other managers
    set on an existing namespace are kept."""
    check_namespace(name)
    for k, v in (labels or {}).items():
        check_label(k, v)
    obj = {"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": dict(labels or {})}}
    return apply(kube, obj, manager=manager)


def ensure_lab_namespace(kube: Any, name: str, *,
                         manager: str = MANAGER_SCENARIO) -> dict[str, Any]:
    """The namespace where a scenario's workloads run, labelled for Katib's collector."""
    return ensure_namespace(kube, name, LAB_LABELS, manager=manager)
