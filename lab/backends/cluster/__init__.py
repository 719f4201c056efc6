"""The cluster backend: the same manifests and pipeline files, run by the real controllers.

Katib Experiments/Trials, PyTorchJobs, TFJobs and InferenceServices are applied server-side into the
lab namespace (created and labelled by kflab for Katib's metrics-collector injection) and
read back as their controllers wrote them: kflab never writes a status. Pipeline runs go to
the KFP API through a port-forward. Each engine has a handler module (tuning, training,
serving, pipelines) with `apply`, `delete` and `logs`; reads are shared here.

Namespaces: `default` (what scenarios and the CLI use when none is named) means the lab
namespace, as a kubeconfig context's namespace would; any other name is used as given.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.errors import InputError, LabError
from lab.kube.kinds import for_object, lookup
from lab.state import state_dir

HANDLERS: dict[str, str] = {
    "PipelineRun": "lab.backends.cluster.pipelines.handler",
    "Experiment": "lab.backends.cluster.tuning.handler",
    "Trial": "lab.backends.cluster.tuning.handler",
    "PyTorchJob": "lab.backends.cluster.training.handler",
    "TFJob": "lab.backends.cluster.training.handler",
    "TrainJob": "lab.backends.cluster.training.trainjob",
    "InferenceService": "lab.backends.cluster.serving.handler",
    "Notebook": "lab.backends.cluster.notebooks.handler",
}
WHEELHOUSE_ENV = "KFLAB_WHEELHOUSE"  # a folder of wheels on every node (offline labs)


def kubeconfig_path(explicit: str | None) -> Path:
    """The kubeconfig: given, else the first of $KUBECONFIG, else ~/.kube/config."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path.home() / ".kube" / "config"


class ClusterBackend:
    name = "cluster"

    def __init__(self, state: str | None = None, *, context: str | None = None,
                 kubeconfig: str | None = None, namespace: str | None = None,
                 manager: str | None = None, force: bool = False) -> None:
        from lab.kube.names import check_namespace
        from lab.kube.objects import MANAGER_APPLY

        if namespace is None:
            from lab.config import lab_namespace

            namespace = lab_namespace()
        self.root = state_dir(state)
        self.context = context
        self.kubeconfig = kubeconfig_path(kubeconfig)
        self.namespace = check_namespace(namespace)
        self.manager = manager or MANAGER_APPLY
        self.force = force  # take over fields other managers own (scenario solutions)
        self.wheelhouse = os.environ.get(WHEELHOUSE_ENV) or None
        self.dry_run = False  # server-side dry run: validated by the API server, not stored
        self.sink: Any = None
        self._kube: Any = None
        self._namespace_ready = False

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def kube(self) -> Any:
        if self._kube is None:
            from lab.kube.client import connect

            self._kube = connect(self.kubeconfig, self.context)
        return self._kube

    def emit(self, event: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(event)

    def say(self, text: str) -> None:
        self.emit({"event": "message", "text": text})

    def ns(self, namespace: str | None) -> str:
        """The namespace to use: `default`/None is the lab namespace."""
        from lab.kube.names import check_namespace

        if namespace in (None, "", "default"):
            return self.namespace
        return check_namespace(namespace)

    def ensure_namespace(self, namespace: str) -> None:
        """Create and label the lab namespace (once per backend); others must exist."""
        if namespace != self.namespace or self._namespace_ready:
            return
        from lab.kube.apierrors import Forbidden
        from lab.kube.namespaces import ensure_lab_namespace

        # A student of a class (docs/teaching.md) may not touch namespaces: the instructor
        # made and labelled theirs; a missing one fails at the next write.
        with contextlib.suppress(Forbidden):
            ensure_lab_namespace(self.kube, namespace, manager=self.manager)
        self._namespace_ready = True

    def handler(self, kind: str) -> Any:
        return importlib.import_module(HANDLERS[lookup(kind).kind])

    def ref(self, kind: str, name: str, namespace: str | None) -> Any:
        from lab.kube.objects import Ref

        k = lookup(kind)
        return Ref(k.api_version, k.kind, name, self.ns(namespace))

    # --- the Backend protocol ---------------------------------------------------------------

    def apply(self, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict[str, Any]:
        kind = for_object(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError(None, "metadata.name", f"{kind.kind} has no name",
                             hint="set metadata.name")
        meta["namespace"] = self.ns(meta.get("namespace"))
        return self.handler(kind.kind).apply(self, obj, base_dir=base_dir, wait=wait)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        k = lookup(kind)
        handler = self.handler(k.kind)
        if hasattr(handler, "get"):
            return handler.get(self, name, self.ns(namespace))
        from lab.kube.objects import get

        return get(self.kube, self.ref(k.kind, name, namespace), missing_ok=True)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        k = lookup(kind)
        handler = self.handler(k.kind)
        ns = None if namespace is None else self.ns(namespace)
        if hasattr(handler, "list_"):
            return handler.list_(self, ns)
        from lab.kube.objects import list_objects

        return list_objects(self.kube, k.api_version, k.kind, ns)

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        k = lookup(kind)
        return bool(self.handler(k.kind).delete(self, k.kind, name, self.ns(namespace)))

    def logs(self, kind: str, name: str, namespace: str = "default",
             replica: str | None = None, *, follow: bool = False,
             tail: int | None = None) -> Iterator[str]:
        """Pod logs as `kubectl logs`: `tail` lines of each pod, `follow` streams them."""
        from lab.backends.cluster.outputs import visible

        k = lookup(kind)
        return visible(self.handler(k.kind).logs(self, k.kind, name, self.ns(namespace),
                                                 replica, follow=follow, tail=tail))

    def predict(self, name: str, payload: dict[str, Any], namespace: str = "default",
                protocol: str | None = "v1") -> dict[str, Any]:
        from lab.backends.cluster.serving import handler

        return handler.predict(self, name, payload, self.ns(namespace), protocol)

    @contextlib.contextmanager
    def open_notebook(self, name: str, namespace: str = "default") -> Iterator[tuple[str, bool]]:
        """(a URL on 127.0.0.1 forwarded to the Notebook's Service, True: the forward lasts
        while this context is open)."""
        from lab.backends.cluster.notebooks.handler import forward

        with forward(self, name, self.ns(namespace)) as url:
            yield url, True

    def gpus(self) -> list[str]:
        """One id per allocatable nvidia.com/gpu on the cluster's Ready nodes."""
        from lab.backends.cluster.gpu import allocatable

        return allocatable(self.kube)

    def down(self) -> list[str]:
        """Close this process's port-forwards; workloads stay on the cluster until deleted."""
        stack = self.__dict__.pop("_forward_stack", None)
        self.__dict__.pop("_forwards", None)
        if stack is not None:
            stack.close()
        return []

    def unavailable(self, requires: tuple[str, ...] | list[str]) -> str | None:
        """Why a scenario needing `requires` cannot run on this cluster (a component's API
        is not served), or None. GPUs are a step's `needs`, checked there."""
        from lab.backends.cluster.components import missing

        return missing(self, requires)

    def clear(self) -> list[str]:
        """Delete every workload kflab's kinds have in this backend's namespace (for
        unattended scenario runs, which start from an empty namespace)."""
        gone = []
        for kind in ("Experiment", "PyTorchJob", "TFJob", "TrainJob", "InferenceService",
                     "Notebook",
                     "PipelineRun"):
            try:
                items = self.list(kind, self.namespace)
            except LabError as exc:
                if "does not serve" in str(exc) or "not installed" in str(exc):
                    continue
                raise
            for item in items:
                if self.delete(kind, item["metadata"]["name"], self.namespace):
                    gone.append(f"{kind}/{item['metadata']['name']}")
        return gone


__all__ = ["ClusterBackend", "kubeconfig_path"]
