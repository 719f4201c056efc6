"""Port-forwards to a Service or a pod, listening on 127.0.0.1 only, on a free port by default.

Each local connection gets its own tunnel through the API server's pods/portforward
subresource (a websocket), like `kubectl port-forward`. A Service is resolved to a pod its
selector matches that is Ready and not being deleted -- the pods the Service's own endpoints
would send traffic to -- the newest of them, so during a rollout a prediction reaches the new
model as soon as it serves and never a replica that is still loading; then the container
port its targetPort names.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lab.errors import LabError
from lab.kube.apierrors import NotFound, translated
from lab.kube.names import check_name, check_namespace

LOOPBACK = "127.0.0.1"
log = logging.getLogger(__name__)


def _api(handle: Any) -> Any:
    """The ApiClient of a Kube, or the ApiClient itself (older callers pass one)."""
    return getattr(handle, "api", handle)


def _timeout(handle: Any) -> float:
    return float(getattr(handle, "timeout", None) or getattr(_api(handle), "kflab_timeout", 5.0))


def _read(handle: Any, verb: str, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
    with translated(verb, what):
        return fn(*args, _request_timeout=_timeout(handle), **kw)


def _running_pod(pods: list[Any], what: str) -> Any:
    # A pod being deleted (a rollout's old replica) still says Running: skip it, as kubectl.
    running = [p for p in pods if p.status and p.status.phase == "Running"
               and not (p.metadata and p.metadata.deletion_timestamp)]
    if not running:
        phases = ", ".join(sorted({(p.status.phase if p.status else None) or "Unknown"
                                   for p in pods})) or "no pods"
        raise LabError(f"no running pod behind {what} ({phases})",
                       hint="wait for it to be Ready (`kflab status`, `kflab logs`)")
    return running[0]


def _is_ready(pod: Any) -> bool:
    conds = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def _ready_pod(pods: list[Any], what: str) -> Any:
    """The newest Ready pod that is not being deleted (an endpoint of the Service)."""
    serving = [p for p in pods if p.status and p.status.phase == "Running" and _is_ready(p)
               and not (p.metadata and p.metadata.deletion_timestamp)]
    if not serving:
        seen = "; ".join(
            f"{p.metadata.name}: {(p.status.phase if p.status else None) or 'Unknown'}"
            + (", being deleted" if p.metadata.deletion_timestamp else
               "" if _is_ready(p) else ", not Ready") for p in pods) or "no pods"
        raise LabError(f"no ready pod behind {what} ({seen})",
                       hint="wait for it to be Ready (`kflab status`, `kflab logs`)")
    return max(serving, key=lambda p: (p.metadata.creation_timestamp is not None,
                                       p.metadata.creation_timestamp, p.metadata.name))


def _container_port(pod: Any, target: Any) -> int:
    if isinstance(target, str) and not target.isdigit():  # a named container port
        for c in pod.spec.containers:
            for p in c.ports or []:
                if p.name == target:
                    return int(p.container_port)
        raise LabError(f"pod {pod.metadata.name} has no port named {target}")
    return int(target)


def service_target(handle: Any, namespace: str, service: str,
                   port: int | str | None = None) -> tuple[str, int]:
    """(pod, container port) behind `service`'s port `port` (number or name; first when None)."""
    from kubernetes import client

    check_namespace(namespace)
    check_name(service, "service name")
    core = client.CoreV1Api(_api(handle))
    what = f"service {namespace}/{service}"
    try:
        svc = _read(handle, "get", what, core.read_namespaced_service, service, namespace)
    except NotFound:
        raise LabError(f"{what} not found",
                       hint="is that component installed? `kflab status`") from None
    ports = svc.spec.ports or []
    chosen = ports[0] if port is None and ports else next(
        (p for p in ports if port in (p.port, p.name, str(p.port))), None)
    if chosen is None:
        have = ", ".join(f"{p.name or ''}:{p.port}".lstrip(":") for p in ports) or "none"
        raise LabError(f"{what} has no port {port}", hint=f"its ports: {have}")
    if not svc.spec.selector:
        raise LabError(f"{what} has no selector, so no pod to forward to",
                       hint="forward to a pod instead (pod/NAME)")
    selector = ",".join(f"{k}={v}" for k, v in svc.spec.selector.items())
    pods = _read(handle, "list", f"pods of {what}", core.list_namespaced_pod, namespace,
                 label_selector=selector)
    pod = _ready_pod(pods.items, what)
    return pod.metadata.name, _container_port(pod, chosen.target_port or chosen.port)


def pod_target(handle: Any, namespace: str, pod: str, port: int | str) -> tuple[str, int]:
    """(pod, container port) for a pod and a port number or container port name; the pod
    must be Running (the kubelet of its node answers the tunnel)."""
    from kubernetes import client

    check_namespace(namespace)
    check_name(pod, "pod name")
    core = client.CoreV1Api(_api(handle))
    obj = _read(handle, "get", f"pod {namespace}/{pod}", core.read_namespaced_pod, pod, namespace)
    running = _running_pod([obj], f"pod/{pod} in {namespace}")
    return running.metadata.name, _container_port(running, port)


def listen(local_port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (a free port when 0); LabError when the port is taken."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind((LOOPBACK, local_port))
    except OSError as exc:
        server.close()
        if exc.errno == errno.EADDRINUSE:
            raise LabError(f"port {local_port} on {LOOPBACK} is already in use",
                           hint="pick another with --port, or leave it out for a free one"
                           ) from None
        raise LabError(f"cannot listen on {LOOPBACK}:{local_port}: {exc.strerror}") from None
    server.listen(16)
    return server


@contextlib.contextmanager
def port_forward(handle: Any, namespace: str, pod: str, port: int, local_port: int = 0, *,
                 errors: list[str] | None = None) -> Iterator[int]:
    """Listen on 127.0.0.1 (never another address) and tunnel each connection to pod:port.

    Yields the local port. A tunnel that fails (the pod went away, RBAC denies
    pods/portforward) closes that one connection and appends a one-line reason to `errors`."""
    from kubernetes import client
    from kubernetes.stream import portforward

    check_namespace(namespace)
    check_name(pod, "pod name")
    core = client.CoreV1Api(_api(handle))
    server = listen(local_port)
    stop = threading.Event()
    failures = errors if errors is not None else []

    def pump(conn: socket.socket) -> None:
        pf = None
        try:
            with translated("port-forward to", f"pod {namespace}/{pod}:{port}"):
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
        except Exception as exc:  # one broken connection must not stop the others
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            failures.append(line)
            log.warning("port-forward connection failed: %s", line)
        finally:
            conn.close()
            if pf is not None:
                # Close our end of the tunnel: the client's proxy thread then closes the
                # websocket itself instead of failing when the server drops it later.
                pf.close()

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


@dataclass
class Forward:
    """A running forward: connect to http://127.0.0.1:`local_port`."""

    local_port: int
    namespace: str
    pod: str
    remote_port: int
    errors: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.local_port}"


def parse_target(target: str) -> tuple[str, str]:
    """('service'|'pod', name) from 'svc/NAME', 'service/NAME', 'pod/NAME' or a bare service."""
    kind, _, name = target.rpartition("/")
    kind = {"": "service", "svc": "service", "service": "service", "services": "service",
            "pod": "pod", "pods": "pod", "po": "pod"}.get(kind.lower(), "")
    if not kind:
        raise LabError(f"cannot forward to {target!r}",
                       hint="give svc/NAME, pod/NAME, or a service name")
    check_name(name, f"{kind} name")
    return kind, name


@contextlib.contextmanager
def forward(handle: Any, namespace: str, target: str, port: int | str | None = None,
            local_port: int = 0) -> Iterator[Forward]:
    """Forward 127.0.0.1:`local_port` (free when 0) to a Service or pod in `namespace`.

    `target` is svc/NAME (port: the Service's port, first when None) or pod/NAME (port
    required: a container port number or name). Checks first that a Running pod is there."""
    kind, name = parse_target(target)
    if kind == "service":
        pod, remote = service_target(handle, namespace, name, port)
    else:
        if port is None:
            raise LabError(f"forwarding to pod/{name} needs a port",
                           hint="give the container port, e.g. pod/NAME 8080")
        pod, remote = pod_target(handle, namespace, name, port)
    errors: list[str] = []
    with port_forward(handle, namespace, pod, remote, local_port, errors=errors) as local:
        yield Forward(local, namespace, pod, remote, errors)
