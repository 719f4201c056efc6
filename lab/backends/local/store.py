"""Resources of the local backend, one JSON file each, shared between kflab processes.

Names and namespaces are checked as the API server checks them (lab.kube.names) and every
path is built by lab.state.path, so no name can reach outside the state folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab import state
from lab.backends.shapes import record_problem as shape_problem
from lab.kube import names
from lab.kube.conditions import now
from lab.kube.kinds import lookup

FIX = "apply the resource again"


class Store:
    """`<state>/resources/<plural>/<namespace>/<name>.json` plus a run folder per resource."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _parts(self, kind: str, name: str, namespace: str) -> tuple[str, str, str]:
        k = lookup(kind)
        names.check_kind_name(k.kind, name)
        names.check_namespace(namespace)
        return k.plural, namespace, name

    def _file(self, kind: str, name: str, namespace: str) -> Path:
        plural, ns, name = self._parts(kind, name, namespace)
        return state.path(self.root, "resources", plural, ns, f"{name}.json")

    def run_path(self, kind: str, name: str, namespace: str = "default") -> Path:
        """The resource's run folder (logs, artifacts), not created."""
        plural, ns, name = self._parts(kind, name, namespace)
        return state.path(self.root, "runs", plural, ns, name)

    def run_dir(self, kind: str, name: str, namespace: str = "default") -> Path:
        """Folder for a resource's logs and artifacts (created on demand)."""
        path = self.run_path(kind, name, namespace)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise state.io_error(exc, path, "create") from None
        return path

    def run_file(self, kind: str, name: str, namespace: str, filename: str) -> Path:
        """A file in the resource's run folder (the folder is created)."""
        self.run_dir(kind, name, namespace)
        plural, ns, name = self._parts(kind, name, namespace)
        return state.path(self.root, "runs", plural, ns, name, filename)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return state.read_json(self._file(kind, name, namespace), fix=FIX, check=shape_problem)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("creationTimestamp", now())
        state.write_json(self._file(obj["kind"], meta["name"], meta["namespace"]), obj)
        return obj

    def put_if_current(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a status update unless the resource was deleted or applied again meanwhile
        (by another kflab process): a stale update must not overwrite the newer one."""
        meta = obj["metadata"]
        current = self.get(obj["kind"], meta["name"], meta["namespace"])
        if current is None or (current.get("metadata") or {}).get("uid") != meta.get("uid"):
            return obj
        return self.put(obj)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        plural = lookup(kind).plural
        if namespace is not None:
            names.check_namespace(namespace)
        base = state.path(self.root, "resources", plural)
        pattern = f"{namespace}/*.json" if namespace else "*/*.json"
        items = [state.read_json(state.confine(self.root, p), fix=FIX, check=shape_problem)
                 for p in sorted(base.glob(pattern)) if not p.name.startswith(".")]
        return [i for i in items if i is not None]

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        existed = state.remove(self.root, self._file(kind, name, namespace))
        state.remove(self.root, self.run_path(kind, name, namespace))
        return existed
