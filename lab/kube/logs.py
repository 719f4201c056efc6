"""Logs of the pods a resource made (Trial, PyTorchJob, InferenceService...), by label selector.

The controllers label the pods they create; `POD_LABELS` says which label names the owner for
each kind, so `kflab logs trial/x` finds the Trial's pods the way `kubectl logs -l` would.
Follow mode streams every pod at once, each line prefixed by its pod (and container).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from lab.errors import LabError
from lab.kube.apierrors import translated
from lab.kube.names import check_label, check_name, check_namespace

# kind -> the label the upstream controller puts on the pods it creates, valued the owner's name.
POD_LABELS: dict[str, str] = {
    "Experiment": "katib.kubeflow.org/experiment",  # Katib: trial (and suggestion) pods
    "Trial": "katib.kubeflow.org/trial",
    "PyTorchJob": "training.kubeflow.org/job-name",  # Training Operator v1 replicas
    "TFJob": "training.kubeflow.org/job-name",
    "TrainJob": "jobset.sigs.k8s.io/jobset-name",  # JobSet labels the nodes' pods
    "InferenceService": "serving.kserve.io/inferenceservice",  # KServe predictor pods
    "Notebook": "notebook-name",  # the Notebook controller's StatefulSet pod
}


def selector_for(kind: str, name: str) -> str:
    """The label selector of the pods that `kind`/`name` owns."""
    check_name(name, f"{kind} name")
    if kind not in POD_LABELS:
        raise LabError(f"kflab does not know which pods a {kind} makes",
                       hint="give a label selector instead (-l key=value)")
    key, value = check_label(POD_LABELS[kind], name)
    return f"{key}={value}"


def pods(kube: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods matching `selector` in `namespace`, oldest first."""
    from kubernetes import client

    check_namespace(namespace)
    core = client.CoreV1Api(kube.api)
    with translated("list", f"pods ({selector}) in namespace {namespace}"):
        found = core.list_namespaced_pod(namespace, label_selector=selector,
                                         _request_timeout=kube.timeout)
    items = [kube.api.sanitize_for_serialization(p) for p in found.items]
    return sorted(items, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                        p["metadata"]["name"]))


def started(pod: dict[str, Any]) -> bool:
    """Whether the pod has run anything yet (so the kubelet has logs to give)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Running", "Succeeded", "Failed"):
        return True
    return any(set(cs.get("state") or {}) & {"running", "terminated"}
               for cs in status.get("containerStatuses") or [])


def _containers(pod: dict[str, Any], container: str | None) -> list[str]:
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if container is None:
        return names
    if container not in names:
        raise LabError(f"pod {pod['metadata']['name']} has no container {container!r}",
                       hint="its containers: " + ", ".join(names))
    return [container]


def _stream(kube: Any, namespace: str, pod: str, container: str, *, follow: bool,
            tail: int | None) -> Iterator[str]:
    from kubernetes import client

    core = client.CoreV1Api(kube.api)
    kw: dict[str, Any] = {"container": container, "follow": follow, "_preload_content": False}
    if tail is not None:
        kw["tail_lines"] = tail
    # Following waits for lines as long as the pod runs: no read timeout then.
    timeout = (kube.timeout, None) if follow else kube.timeout
    with translated("read logs of", f"pod {namespace}/{pod} ({container})"):
        resp = core.read_namespaced_pod_log(pod, namespace, _request_timeout=timeout, **kw)
        try:
            buf = b""
            for chunk in resp.stream(4096, decode_content=False):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace")
            if buf:
                yield buf.decode("utf-8", "replace")
        finally:
            resp.release_conn()


def pod_logs(kube: Any, namespace: str, selector: str, *, container: str | None = None,
             tail: int | None = None, follow: bool = False,
             only: set[str] | None = None) -> Iterator[tuple[str, str]]:
    """(source, line) for every container of every started pod matching `selector`; source
    is the pod (with `/container` when it has several). `tail`: the last N lines of each.
    `follow` streams until every pod's log ends (Ctrl-C stops it). Pods that have not
    started yet are skipped; when none has, a LabError says which are waiting."""
    if tail is not None and tail < 0:
        raise LabError("tail must be 0 or more lines")
    found = pods(kube, namespace, selector)
    if only is not None:  # e.g. the pod of one pipeline task
        found = [p for p in found if p["metadata"]["name"] in only]
    if not found:
        raise LabError(f"no pods match {selector} in namespace {namespace}"
                       + (f" named {', '.join(sorted(only))}" if only else ""),
                       hint="the controller may not have created them yet: `kflab get`")
    ready = [p for p in found if started(p)]
    if not ready:
        waiting = ", ".join(f"{p['metadata']['name']} "
                            f"({(p.get('status') or {}).get('phase') or 'Unknown'})"
                            for p in found)
        raise LabError(f"no logs yet: no pod matching {selector} has started: {waiting}",
                       hint="wait until it runs (`kflab get`), or look at its events")
    sources = []
    for pod in ready:
        names = _containers(pod, container)
        for c in names:
            label = pod["metadata"]["name"] + (f"/{c}" if len(names) > 1 else "")
            sources.append((label, pod["metadata"]["name"], c))
    if not follow:
        for label, pod_name, c in sources:
            for line in _stream(kube, namespace, pod_name, c, follow=False, tail=tail):
                yield label, line
        return
    yield from _merged(kube, namespace, sources, tail)


def _merged(kube: Any, namespace: str, sources: list[tuple[str, str, str]],
            tail: int | None) -> Iterator[tuple[str, str]]:
    """Follow several logs at once: one reader thread each, lines in arrival order."""
    lines: queue.Queue[tuple[str, str] | BaseException | None] = queue.Queue(maxsize=1000)

    def reader(label: str, pod: str, container: str) -> None:
        try:
            for line in _stream(kube, namespace, pod, container, follow=True, tail=tail):
                lines.put((label, line))
        except BaseException as exc:  # handed to the consumer, raised there
            lines.put(exc)
        finally:
            lines.put(None)

    for src in sources:
        threading.Thread(target=reader, args=src, daemon=True).start()
    running = len(sources)
    while running:
        item = lines.get()
        if item is None:
            running -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield item
