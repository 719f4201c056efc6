"""The local backend: upstream semantics, no cluster.

Each supported kind has a handler module (pipelines, tuning, training, serving) with the
same functions -- `apply`, `delete`, `logs`, and for kinds driven by a kflab process
`in_progress`/`abandon` -- and reads/writes resources through the shared `Store`, so another
kflab process (`kflab check`) sees the same objects.

Ownership (owners.py): `apply` holds the resource's lease while it runs, so a second apply
of the same name fails fast; `delete`/`down` stop the owner from any terminal; every read
notices a resource left "running" by an owner that died (SIGKILL, closed terminal), stops
what it left behind and marks it failed, saying so.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local import owners
from lab.backends.local.procs import Registry
from lab.backends.local.store import Store
from lab.errors import InputError, LabError, NotFound
from lab.kube import names
from lab.kube.conditions import is_true
from lab.kube.kinds import for_object, lookup, not_taken_locally
from lab.state import StateError, state_dir

# kind -> module implementing apply(backend, obj, base_dir) / delete(backend, obj) / logs(...)
HANDLERS: dict[str, str] = {
    "PipelineRun": "lab.backends.local.pipelines.handler",
    "Experiment": "lab.backends.local.tuning.handler",
    "Trial": "lab.backends.local.tuning.handler",
    "PyTorchJob": "lab.backends.local.training.handler",
    "TFJob": "lab.backends.local.training.handler",
    "TrainJob": "lab.backends.local.training.handler",
    "InferenceService": "lab.backends.local.serving.handler",
    "Notebook": "lab.backends.local.notebooks.handler",
}

# kinds whose handler has refresh(backend, obj): their status follows a running process
LIVE_KINDS = frozenset({"InferenceService", "Notebook"})
APPLIED = "applied.json"  # the manifest a finished run was applied from


def _applied(obj: dict[str, Any]) -> dict[str, Any]:
    """What the user applied (kubectl compares this, not the status): a copy, as the handler
    then fills in defaults (a TrainJob's runtimeRef, a job's replicas) in place."""
    return copy.deepcopy({k: v for k, v in obj.items() if k != "status"})


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

    def validate(self, obj: dict[str, Any], *, base_dir: Path) -> Any:
        """Everything `apply` checks, with no side effect: `kflab apply` runs this on every
        document before applying the first, so one bad document means nothing runs."""
        if (refusal := not_taken_locally(obj)) is not None:
            raise refusal
        kind = for_object(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError(None, "metadata.name", f"{kind.kind} has no name",
                             hint="set metadata.name")
        meta.setdefault("namespace", "default")
        names.check_object(obj)
        handler = self._handler(kind.kind)
        if hasattr(handler, "validate"):
            handler.validate(self, obj, base_dir=base_dir)
        return handler

    def apply(self, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict[str, Any]:
        kind = for_object(obj)
        handler = self.validate(obj, base_dir=base_dir)  # before replacing what runs
        meta = obj["metadata"]
        self.last_apply = "configured"
        applied = {"object": _applied(obj), "base_dir": str(base_dir)}
        if getattr(handler, "UNCHANGED_IS_NOOP", False):
            same = self._unchanged(kind.kind, meta["namespace"], meta["name"], applied)
            if same is not None:
                self.last_apply = "unchanged"
                return same
        with owners.acquire(self.root, kind.kind, meta["namespace"], meta["name"]) as lease:
            lease.stop_previous()
            old = self.store.get(kind.kind, meta["name"], meta["namespace"])
            if old is not None and getattr(handler, "ROLLOUT", False):
                # replaced the way upstream rolls out (model servers: the old one serves
                # until the new one is ready)
                return handler.apply(self, obj, base_dir=base_dir, wait=wait, lease=lease,
                                     previous=old)
            if old is not None and hasattr(handler, "restartable") and \
                    handler.restartable(self, old, obj):
                # edited in place, as upstream resumes it (Katib's resumePolicy)
                done = handler.restart(self, old, obj, base_dir=base_dir, lease=lease)
            else:
                if old is not None:
                    handler.delete(self, old)
                    self.store.delete(kind.kind, meta["name"], meta["namespace"])
                else:
                    self.last_apply = "created"
                done = handler.apply(self, obj, base_dir=base_dir, wait=wait, lease=lease)
            if getattr(handler, "UNCHANGED_IS_NOOP", False):
                state.write_json(self.store.run_file(kind.kind, meta["name"], meta["namespace"],
                                                     APPLIED), applied)
            return done

    def _unchanged(self, kind: str, namespace: str, name: str,
                   applied: dict[str, Any]) -> dict[str, Any] | None:
        """The stored resource when this apply changes nothing (kubectl: `unchanged`, and
        nothing restarts): the same manifest from the same folder, whose run ended (the
        record is written once the run returns, so an interrupted run runs again)."""
        record = state.path(self.store.run_path(kind, name, namespace), APPLIED)
        try:
            if state.read_json(record) != applied:
                return None
        except StateError:
            return None
        return self.get(kind, name, namespace)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self._refreshed(kind, self.store.get(kind, name, namespace))

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [self._refreshed(kind, o) for o in self.store.list(kind, namespace)]

    def _refreshed(self, kind: str, obj: Any) -> Any:
        """Resources backed by a live process (model servers) re-read its state on each look,
        so a server that died shows as not ready; resources driven by a kflab process whose
        owner died are stopped and marked failed."""
        if obj is None:
            return obj
        k = lookup(kind).kind
        handler = self._handler(k)
        if k in LIVE_KINDS:
            return handler.refresh(self, obj)
        if hasattr(handler, "in_progress") and handler.in_progress(obj):
            return self._reconcile(k, obj)
        return obj

    def _reconcile(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        handler = self._handler(kind)
        okind, oname = handler.owner_of(obj) if hasattr(handler, "owner_of") \
            else (kind, name)
        found = owners.probe(self.root, okind, ns, oname)
        if found.alive:
            return obj
        try:
            lease = owners.acquire(self.root, okind, ns, oname, wait=0)
        except owners.Busy:
            return obj  # a new owner has just started it
        except StateError as exc:  # a read-only state folder: stop, report, save nothing
            why = owners.dead_owner_reason(found.record, owners.stop_leftovers(found.record))
            return handler.abandon(self, copy.deepcopy(obj), f"{why} (not saved: {exc})",
                                   save=False)
        with lease:
            why = owners.dead_owner_reason(found.record, lease.stop_previous())
            try:
                if okind != kind and (parent := self.store.get(okind, oname, ns)) is not None:
                    parent_handler = self._handler(okind)
                    if parent_handler.in_progress(parent):
                        parent_handler.abandon(self, parent, why)
                current = self.store.get(kind, name, ns)
                if current is not None and handler.in_progress(current):
                    handler.abandon(self, current, why)
                return self.store.get(kind, name, ns) or obj
            except StateError as exc:
                return handler.abandon(self, copy.deepcopy(obj), f"{why} (not saved: {exc})",
                                       save=False)

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        k = lookup(kind).kind
        names.check_kind_name(k, name, field="name")
        names.check_namespace(namespace, field="namespace")
        owners.stop(self.root, k, namespace, name, by="kflab delete")
        with owners.acquire(self.root, k, namespace, name) as lease:
            lease.stop_previous()
            obj = self.store.get(k, name, namespace)
            if obj is None:
                return False
            self._handler(k).delete(self, obj)
            gone = self.store.delete(k, name, namespace)
            lease.forget()
            return gone

    def logs(self, kind: str, name: str, namespace: str = "default",
             replica: str | None = None, *, follow: bool = False,
             tail: int | None = None) -> Iterator[str]:
        """The resource's log lines; `tail`: only the last N (of each replica or trial, as
        kubectl per pod); `follow`: keep printing new lines while it runs."""
        k = lookup(kind).kind
        obj = self.store.get(k, name, namespace)
        if obj is None:
            raise NotFound(f"{k} '{name}' not found in namespace '{namespace}'",
                           hint=f"list them with `kflab get {lookup(kind).plural}`")
        if tail is not None and tail < 0:
            raise LabError("--tail must be 0 or more lines")
        handler = self._handler(k)
        lines = handler.logs(self, obj, replica)
        if not follow:
            return _tails(lines, tail, _multi(k, replica)) if tail is not None else lines
        return self._follow(k, name, namespace, replica, tail)

    def _follow(self, kind: str, name: str, namespace: str, replica: str | None,
                tail: int | None) -> Iterator[str]:
        """New lines as they are written, until the resource stops running (a model server:
        until interrupted). Logs only grow, so each source's lines are counted once."""
        import time

        handler = self._handler(kind)
        seen: dict[str, int] = {}
        first = True
        while True:
            obj = self.get(kind, name, namespace)
            running = obj is not None and (
                handler.in_progress(obj) if hasattr(handler, "in_progress")
                else kind in LIVE_KINDS)
            batch = list(handler.logs(self, obj, replica)) if obj is not None else []
            fresh: list[str] = []
            counts: dict[str, int] = {}
            for line in batch:
                key = _source(line)
                counts[key] = counts.get(key, 0) + 1
                if counts[key] > seen.get(key, 0):
                    fresh.append(line)
            seen = counts
            yield from (_tails(iter(fresh), tail, _multi(kind, replica))
                        if first and tail is not None else fresh)
            first = False
            if not running:
                return
            time.sleep(0.5)

    def predict(self, name: str, payload: dict[str, Any], namespace: str = "default",
                protocol: str = "v1") -> dict[str, Any]:
        return self._handler("InferenceService").predict(self, name, payload, namespace,
                                                          protocol)

    @contextlib.contextmanager
    def open_notebook(self, name: str, namespace: str = "default") -> Iterator[tuple[str, bool]]:
        """(the URL of the Notebook's JupyterLab with its token, False: nothing to keep
        open -- the server runs in the background until `kflab delete`)."""
        names.check_kind_name("Notebook", name, field="name")
        names.check_namespace(namespace, field="namespace")
        yield self._handler("Notebook").url(self, name, namespace), False

    def gpus(self) -> list[str]:
        """UUIDs of the GPUs workloads can be given here: NVML's, narrowed by the user's
        CUDA_VISIBLE_DEVICES (gpu_devices.py); a variable naming a GPU wrongly is refused."""
        from lab.backends.local.gpus import inventory

        return inventory()

    def gpu_why(self) -> str:
        """Why workloads can be given fewer GPUs than the machine may have, or none (no
        NVML, CUDA_VISIBLE_DEVICES=none...); empty when there is nothing to say."""
        from lab.backends.local.gpu_devices import view

        return view().why

    def gpu_capabilities(self) -> dict[str, tuple[int, int] | None]:
        """Each GPU's CUDA compute capability (bf16 needs 8.0), by the ids `gpus` gives."""
        from lab.backends.local.gpu_devices import view

        return {g.uuid: g.capability for g in view().devices}

    def in_progress(self) -> list[str]:
        """What is running now that could still change what a check sees: a kflab process
        driving a resource (a pipeline run, an experiment, a job: its owner lock is held), or
        a model or notebook server still starting. Empty means nothing here will change on
        its own, so a failing check need not wait (checks.evaluate)."""
        busy = [f"{kind}/{ns}/{name}" for kind, ns, name in owners.owned(self.root)
                if owners.probe(self.root, kind, ns, name).alive]
        for rec in self.procs.all():
            kind, _, rest = str(rec.owner).partition("/")
            ns, _, name = rest.partition("/")
            if not rec.running or kind not in LIVE_KINDS or not name:
                continue
            try:
                obj = self.get(kind, name, ns)
            except LabError:
                continue
            status = (obj or {}).get("status") or {}
            # not Ready yet, or a rollout still loading the new model (KServe's own
            # modelStatus.transitionStatus says InProgress meanwhile)
            if obj is not None and (not is_true(status, "Ready") or (
                    status.get("modelStatus") or {}).get("transitionStatus") == "InProgress"):
                busy.append(rec.owner)
        return busy

    def down(self) -> list[str]:
        """Stop every run in progress (from any terminal) and every background server."""
        stopped = []
        for kind, ns, name in list(owners.owned(self.root)):
            if owners.stop(self.root, kind, ns, name, by="kflab down"):
                stopped.append(f"{lookup(kind).kind.lower()}/{ns}/{name}")
        stopped += self.procs.stop_all()
        from lab.backends.local.containers import cleanup

        if (left := cleanup.sweep_state(self.root)):  # whatever a killed client left
            stopped.append(f"{left} container(s) of this state folder")
        return stopped


def _source(line: str) -> str:
    """Which log a line came from when a resource has several (`[worker-1] ...`)."""
    if line.startswith("[") and "] " in line:
        return line[1:line.index("] ")]
    return ""


def _multi(kind: str, replica: str | None) -> bool:
    """Whether the log interleaves several sources, each line prefixed `[source] `."""
    return replica is None and kind in ("PyTorchJob", "TFJob", "TrainJob", "Experiment",
                                        "PipelineRun")


def _tails(lines: Iterator[str], n: int, multi: bool) -> Iterator[str]:
    """The last `n` lines (of each source, as kubectl --tail per pod)."""
    import collections

    kept: dict[str, collections.deque[str]] = {}
    for line in lines:
        key = _source(line) if multi else ""
        kept.setdefault(key, collections.deque(maxlen=n)).append(line)
    return (line for queue in kept.values() for line in queue)
