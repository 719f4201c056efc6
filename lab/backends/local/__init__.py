"""The local backend: upstream semantics, no cluster.

Each supported kind has a handler module (pipelines, tuning, training, serving) with the
same three functions -- `apply`, `delete`, `logs` -- and reads/writes resources through the
shared `Store`, so another kflab process (`kflab check`) sees the same objects.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.local.procs import Registry
from lab.backends.local.store import Store
from lab.errors import InputError, LabError
from lab.kube.kinds import for_object, lookup
from lab.state import state_dir

# kind -> module implementing apply(backend, obj, base_dir) / delete(backend, obj) / logs(...)
HANDLERS: dict[str, str] = {
    "PipelineRun": "lab.backends.local.pipelines.handler",
    "Experiment": "lab.backends.local.tuning.handler",
    "Trial": "lab.backends.local.tuning.handler",
    "PyTorchJob": "lab.backends.local.training.handler",
    "InferenceService": "lab.backends.local.serving.handler",
}

# kinds whose handler has refresh(backend, obj): their status follows a running process
LIVE_KINDS = frozenset({"InferenceService"})


class LocalBackend:
    name = "local"

    def __init__(self, state: str | None = None) -> None:
        self.root = state_dir(state)
        self.store = Store(self.root)
        self.procs = Registry(self.root)
        self.sink: Any = None  # progress callback set by the CLI: sink(event_dict)

    def emit(self, event: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(event)

    def _handler(self, kind: str) -> Any:
        name = lookup(kind).kind
        module = HANDLERS.get(name)
        if module is None or importlib.util.find_spec(module) is None:
            raise LabError(f"{name} is not supported on the local backend",
                           hint="run it on a cluster backend, or see `kflab scenario list`")
        return importlib.import_module(module)

    def apply(self, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict[str, Any]:
        kind = for_object(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError(None, "metadata.name", f"{kind.kind} has no name",
                             hint="set metadata.name")
        meta.setdefault("namespace", "default")
        handler = self._handler(kind.kind)
        if hasattr(handler, "validate"):  # reject bad input before replacing what runs
            handler.validate(self, obj, base_dir=base_dir)
        old = self.store.get(kind.kind, meta["name"], meta["namespace"])
        if old is not None:
            handler.delete(self, old)
            self.store.delete(kind.kind, meta["name"], meta["namespace"])
        return handler.apply(self, obj, base_dir=base_dir, wait=wait)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self._refreshed(kind, self.store.get(kind, name, namespace))

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [self._refreshed(kind, o) for o in self.store.list(kind, namespace)]

    def _refreshed(self, kind: str, obj: Any) -> Any:
        """Resources backed by a live process (model servers) re-read its state on each look,
        so a server that died shows as not ready."""
        if obj is None or lookup(kind).kind not in LIVE_KINDS:
            return obj
        return self._handler(kind).refresh(self, obj)

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        obj = self.store.get(kind, name, namespace)
        if obj is None:
            return False
        self._handler(kind).delete(self, obj)
        return self.store.delete(kind, name, namespace)

    def logs(self, kind: str, name: str, namespace: str = "default",
             replica: str | None = None) -> Iterator[str]:
        obj = self.store.get(kind, name, namespace)
        if obj is None:
            raise LabError(f"{lookup(kind).kind} '{name}' not found in namespace '{namespace}'",
                           hint=f"list them with `kflab get {lookup(kind).plural}`")
        return self._handler(kind).logs(self, obj, replica)

    def predict(self, name: str, payload: dict[str, Any], namespace: str = "default",
                protocol: str = "v1") -> dict[str, Any]:
        return self._handler("InferenceService").predict(self, name, payload, namespace,
                                                          protocol)

    def gpus(self) -> list[str]:
        """GPU ids workloads can use here (CUDA_VISIBLE_DEVICES, else the NVIDIA driver's)."""
        from lab.backends.local.training.env import visible_gpus

        return visible_gpus()

    def down(self) -> list[str]:
        return self.procs.stop_all()

