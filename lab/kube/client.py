"""A thin client over the kubernetes package: one API per kubeconfig, plain dicts out.

Only what `kflab status` and `kflab open` need: nodes, workloads' readiness, services and
a port-forward bound to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.errors import LabError


def api_client(kubeconfig: Path, context: str | None = None, timeout: float = 5.0) -> Any:
    from kubernetes import client, config

    if not kubeconfig.exists():
        raise LabError(f"no kubeconfig at {kubeconfig}", hint="run `kflab up` first")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), context=context,
                            client_configuration=cfg)
    cfg.retries = 1
    api = client.ApiClient(cfg)
    api.kflab_timeout = timeout  # type: ignore[attr-defined]
    return api


def _call(api: Any, fn: Any, *args: Any, **kw: Any) -> Any:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return fn(*args, _request_timeout=getattr(api, "kflab_timeout", 5.0), **kw)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise LabError(f"Kubernetes API: {exc.status} {exc.reason}") from None
    except (HTTPError, OSError) as exc:
        raise LabError(f"cannot reach the Kubernetes API: {exc}",
                       hint="is the lab running? `kflab up`") from None


def nodes(api: Any) -> list[dict[str, Any]]:
    """Each node: name, Ready, kubelet version and allocatable NVIDIA GPUs."""
    from kubernetes import client

    out = []
    res = _call(api, client.CoreV1Api(api).list_node)
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

    d = _call(api, client.AppsV1Api(api).read_namespaced_deployment, name, namespace)
    if d is None:
        return None, "not installed"
    want = d.spec.replicas if d.spec.replicas is not None else 1
    have = d.status.available_replicas or 0
    return have >= want, f"{have}/{want} available"


def service_target(api: Any, namespace: str, service: str) -> tuple[str, int]:
    """A running pod behind `service` and the container port its first port maps to."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    svc = _call(api, core.read_namespaced_service, service, namespace)
    if svc is None:
        raise LabError(f"service {namespace}/{service} not found",
                       hint="is that component installed? `kflab status`")
    selector = ",".join(f"{k}={v}" for k, v in (svc.spec.selector or {}).items())
    pods = _call(api, core.list_namespaced_pod, namespace, label_selector=selector)
    running = [p for p in (pods.items if pods else []) if p.status.phase == "Running"]
    if not running:
        raise LabError(f"no running pod behind {namespace}/{service}",
                       hint="wait for it to be Ready (`kflab status`)")
    pod = running[0]
    target = svc.spec.ports[0].target_port
    if isinstance(target, str) and not target.isdigit():  # a named container port
        for c in pod.spec.containers:
            for p in c.ports or []:
                if p.name == target:
                    return pod.metadata.name, int(p.container_port)
        raise LabError(f"pod {pod.metadata.name} has no port named {target}")
    return pod.metadata.name, int(target or svc.spec.ports[0].port)


@contextlib.contextmanager
def port_forward(api: Any, namespace: str, pod: str, port: int,
                 local_port: int = 0) -> Iterator[int]:
    """Listen on 127.0.0.1 (never another address) and tunnel each connection to pod:port."""
    from kubernetes import client
    from kubernetes.stream import portforward

    core = client.CoreV1Api(api)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", local_port))
    server.listen(16)
    stop = threading.Event()

    def pump(conn: socket.socket) -> None:
        try:
            pf = portforward(core.connect_get_namespaced_pod_portforward, pod, namespace,
                             ports=str(port))
            remote = pf.socket(port)
            remote.setblocking(True)
            pair = {conn: remote, remote: conn}
            while not stop.is_set():
                readable, _, _ = select.select(list(pair), [], [], 0.5)
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    pair[src].sendall(data)
        except Exception:  # noqa: S110 - one broken browser connection must not stop the rest
            pass
        finally:
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=pump, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
