"""`kflab status`: the VM (provider), the node, each component's readiness, GPUs, endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import LabError

# Workloads that must be available for a component to count as Ready (one replica each in
# the lab profile). Namespaces follow the upstream kubeflow/manifests 26.03 installs.
# `kflab open NAME`: the Service to forward and the path to open.
ENDPOINTS: dict[str, tuple[str, str, str]] = {
    "pipelines": ("kubeflow", "ml-pipeline-ui", "/"),
    "katib": ("kubeflow", "katib-ui", "/katib/"),
}


@dataclass
class Report:
    lab: str
    provider: str
    vm: str
    vm_detail: str
    api: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus_allocatable: int = 0
    endpoints: dict[str, str] = field(default_factory=dict)
    error: str = ""

    @property
    def ready(self) -> bool:
        return (not self.error and bool(self.nodes) and all(n["ready"] for n in self.nodes)
                and all(c["ready"] for c in self.components.values()))


# A component whose admission webhook, served by one of its Deployments, refuses requests
# for more than itself while that Deployment is down (failurePolicy Fail, the v1 default).
# Katib v0.19.0 manifests/v1beta1/components/webhook/webhooks.yaml: the pod mutator
# `mutator.pod.katib.kubeflow.org`, served by katib-controller, has no failurePolicy (so
# Fail) and selects every namespace labelled for metrics-collector injection -- the lab's.
GATES = {"katib": ("katib-controller",
                   "Katib's pod webhook (failurePolicy Fail) is served by katib-controller: "
                   "while it is down, every new pod in namespace {ns} is refused "
                   "(PyTorchJobs, InferenceService predictors, Notebooks, not only trials) "
                   "with an error naming mutator.pod.katib.kubeflow.org; see "
                   "docs/troubleshooting.md")}


def component_status(api: Any, component: str) -> dict[str, Any]:
    from lab.components.catalog import load
    from lab.kube.client import deployment_ready

    catalog = load()
    # The Deployments that must be Available: the same list the kubeflow role waits for.
    refs = [ref.split("/", 1) for ref in catalog.get(component).ready]
    details, ready, down = [], True, set()
    for namespace, name in refs:
        ok, detail = deployment_ready(api, namespace, name)
        ready = ready and bool(ok)
        if not ok:
            down.add(name)
        details.append(f"{name} {detail}")
    out = {"ready": ready, "namespace": refs[0][0] if refs else "",
           "detail": "; ".join(details)}
    gate = GATES.get(component)
    if gate and gate[0] in down:
        out["warning"] = gate[1].format(ns=catalog.lab_namespace)
    return out


def gather(profile: Any, provider: Any, kubeconfig: Path) -> Report:
    st = provider.status()
    rep = Report(profile.name, profile.provider, st.state, st.detail)
    if st.state != "running":
        return rep
    from lab.kube.client import api_client, nodes

    try:
        api = api_client(kubeconfig)
        rep.api = api.configuration.host
        rep.nodes = nodes(api)
        rep.gpus_allocatable = sum(n["gpus"] for n in rep.nodes)
        for comp in profile.components:
            rep.components[comp] = component_status(api, comp)
    except LabError as exc:
        rep.error = str(exc)
    for comp, (_ns, _svc, path) in ENDPOINTS.items():
        if comp in profile.components:
            rep.endpoints[comp] = f"kflab open {comp}  (then http://127.0.0.1:<port>{path})"
    return rep
