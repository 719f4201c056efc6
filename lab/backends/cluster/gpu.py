"""The cluster half of GPU checks: what the nodes advertise to the scheduler.

A workload gets a GPU on Kubernetes when a Ready node advertises `nvidia.com/gpu` as
allocatable (the NVIDIA device plugin) and the pod asks for it in `resources.limits`, run
with the `nvidia` RuntimeClass where the node's container runtime needs it (k3s with the
NVIDIA container toolkit). The gpu-check scenario's job is the pod that proves it sees one.
"""

from __future__ import annotations

from typing import Any

RESOURCE = "nvidia.com/gpu"


def allocatable(kube: Any) -> list[str]:
    """`node/index` for every allocatable GPU of every Ready node."""
    from lab.kube.client import nodes

    out = []
    for node in nodes(kube.api):
        if node["ready"]:
            out += [f"{node['name']}/{i}" for i in range(node["gpus"])]
    return out


def runtime_class(kube: Any, name: str = "nvidia") -> bool:
    """Whether the cluster defines the RuntimeClass GPU pods name (k3s: `nvidia`)."""
    from lab.kube.objects import Ref, get

    return get(kube, Ref("node.k8s.io/v1", "RuntimeClass", name), missing_ok=True) is not None
