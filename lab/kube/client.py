"""Connecting to a Kubernetes API server: one `Kube` handle per kubeconfig context.

A `Kube` holds the kubernetes package's ApiClient and, built on first use, its dynamic client
(discovery kept in memory: no shared cache file in /tmp). Every other lab.kube module takes a
`Kube` first. Also here: the few typed reads `kflab status` needs (nodes, Deployments).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.kube.apierrors import translated

DEFAULT_TIMEOUT = 10.0  # seconds for one request (connect + read); watches set their own


@dataclass
class Kube:
    """A connection to one API server: `api` is a kubernetes.client.ApiClient."""

    api: Any
    timeout: float = DEFAULT_TIMEOUT
    context: str | None = None
    namespace: str | None = None  # the context's namespace: the default for namespaced kinds
    _dynamic: Any = field(default=None, repr=False)

    @property
    def server(self) -> str:
        """The API server URL, for messages."""
        return str(self.api.configuration.host)

    @property
    def dynamic(self) -> Any:
        """The kubernetes dynamic client (discovery runs on first use, then stays cached)."""
        if self._dynamic is None:
            with translated("discover", "the server's APIs"):
                self._dynamic = _dynamic_client(self.api, self.timeout)
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any:
        """The dynamic client's Resource for apiVersion + kind (NotServed when absent)."""
        with translated("find", f"{kind} ({api_version})"):
            return self.dynamic.resources.get(api_version=api_version, kind=kind)


def _dynamic_client(api: Any, timeout: float) -> Any:
    import tempfile

    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.discovery import LazyDiscoverer

    class MemoryDiscoverer(LazyDiscoverer):
        """Discovery without the shared /tmp cache file another user could plant."""

        def _write_cache(self) -> None:
            return None

    class TimedDynamicClient(DynamicClient):
        """Every request (discovery included) gets a timeout unless it sets its own."""

        def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
            params.setdefault("_request_timeout", timeout)
            return super().request(method, path, body=body, **params)

    # A path that never exists: the discoverer neither reads nor (overridden) writes it.
    nowhere = str(Path(tempfile.gettempdir()) / "kflab-no-discovery-cache" / "none.json")
    return TimedDynamicClient(api, cache_file=nowhere, discoverer=MemoryDiscoverer)


def precheck(kubeconfig: Path) -> None:
    """Read a kubeconfig through kflab's loader before the kubernetes library does (it
    reads whatever it is given, /dev/zero and FIFOs included, and expands YAML aliases):
    capped, a regular file, no alias bombs. An InputError names the file."""
    from lab.yamlio import load_documents, read_text

    load_documents(read_text(Path(kubeconfig), hint="point --kubeconfig at a kubeconfig "
                                                   "file"), str(kubeconfig),
                   duplicates="keep")


def contexts(kubeconfig: Path) -> tuple[list[str], str | None]:
    """(context names, current context) of a kubeconfig file."""
    from kubernetes import config

    precheck(kubeconfig)
    try:
        found, current = config.list_kube_config_contexts(config_file=str(kubeconfig))
    except (config.ConfigException, OSError, ValueError) as exc:
        raise LabError(f"{kubeconfig}: not a usable kubeconfig: {exc}",
                       hint="point --kubeconfig at a kubeconfig file") from None
    return [c["name"] for c in found], (current or {}).get("name")


def connect(kubeconfig: Path, context: str | None = None,
            timeout: float = DEFAULT_TIMEOUT) -> Kube:
    """A Kube for `context` of `kubeconfig` (its current context when None).

    Nothing is sent yet: the first call reports an unreachable server or bad credentials."""
    from kubernetes import config

    api = api_client(kubeconfig, context, timeout)
    found, current = config.list_kube_config_contexts(config_file=str(kubeconfig))
    chosen = next((c for c in found if c["name"] == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return Kube(api, timeout=timeout, context=context or (chosen or {}).get("name"),
                namespace=namespace)


def api_client(kubeconfig: Path, context: str | None = None, timeout: float = 5.0) -> Any:
    """A kubernetes ApiClient for `context` of `kubeconfig`; LabError when it cannot load."""
    from kubernetes import client, config

    kubeconfig = Path(kubeconfig)
    if not kubeconfig.exists():
        raise LabError(f"no kubeconfig at {kubeconfig}", hint="run `kflab up` first")
    precheck(kubeconfig)
    if context is not None:
        names, _ = contexts(kubeconfig)
        if context not in names:
            raise LabError(f"{kubeconfig}: no context named {context!r}",
                           hint="use one of: " + (", ".join(names) or "(none)"))
    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=str(kubeconfig), context=context,
                                client_configuration=cfg)
    except (config.ConfigException, OSError, ValueError) as exc:
        raise LabError(f"{kubeconfig}: cannot use this kubeconfig: {exc}",
                       hint="check its clusters, users and contexts "
                            "(`kubectl config view`)") from None
    cfg.retries = 1
    api = client.ApiClient(cfg)
    api.kflab_timeout = timeout  # type: ignore[attr-defined]
    return api


def _call(api: Any, fn: Any, *args: Any, what: str = "", **kw: Any) -> Any:
    """A typed-API call; None on 404, KubeError on anything else."""
    from lab.kube.apierrors import NotFound

    try:
        with translated("read", what or getattr(fn, "__name__", "the API")):
            return fn(*args, _request_timeout=getattr(api, "kflab_timeout", 5.0), **kw)
    except NotFound:
        return None


def nodes(api: Any) -> list[dict[str, Any]]:
    """Each node: name, Ready, kubelet version and allocatable NVIDIA GPUs."""
    from kubernetes import client

    out = []
    res = _call(api, client.CoreV1Api(api).list_node, what="nodes")
    for n in res.items if res else []:
        ready = next((c.status for c in n.status.conditions or [] if c.type == "Ready"), "Unknown")
        alloc = n.status.allocatable or {}
        out.append({"name": n.metadata.name, "ready": ready == "True",
                    "version": n.status.node_info.kubelet_version if n.status.node_info else "",
                    "gpus": int(alloc.get("nvidia.com/gpu", "0") or 0)})
    return out


def deployment_ready(api: Any, namespace: str, name: str) -> tuple[bool | None, str]:
    """(ready, detail); ready is None when the Deployment does not exist."""
    from kubernetes import client

    d = _call(api, client.AppsV1Api(api).read_namespaced_deployment, name, namespace,
              what=f"Deployment {namespace}/{name}")
    if d is None:
        return None, "not installed"
    want = d.spec.replicas if d.spec.replicas is not None else 1
    have = d.status.available_replicas or 0
    return have >= want, f"{have}/{want} available"


# Moved to lab.kube.portforward; kept importable from here for existing callers.
from lab.kube.portforward import port_forward, service_target  # noqa: E402

__all__ = ["DEFAULT_TIMEOUT", "Kube", "api_client", "connect", "contexts", "deployment_ready",
           "nodes", "port_forward", "service_target"]
