"""Resources of the local backend, one JSON file each, shared between kflab processes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from lab.kube.conditions import now
from lab.kube.kinds import lookup
from lab.state import read_json, write_json


class Store:
    """`<state>/resources/<plural>/<namespace>/<name>.json` plus a run folder per resource."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, kind: str, name: str, namespace: str) -> Path:
        return self.root / "resources" / lookup(kind).plural / namespace / f"{name}.json"

    def run_dir(self, kind: str, name: str, namespace: str = "default") -> Path:
        """Folder for a resource's logs and artifacts (created on demand)."""
        path = self.root / "runs" / lookup(kind).plural / namespace / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return read_json(self._file(kind, name, namespace))

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("creationTimestamp", now())
        write_json(self._file(obj["kind"], meta["name"], meta["namespace"]), obj)
        return obj

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        base = self.root / "resources" / lookup(kind).plural
        pattern = f"{namespace}/*.json" if namespace else "*/*.json"
        items = [read_json(p) for p in sorted(base.glob(pattern))]
        return [i for i in items if i is not None]

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        path = self._file(kind, name, namespace)
        existed = path.exists()
        path.unlink(missing_ok=True)
        shutil.rmtree(self.root / "runs" / lookup(kind).plural / namespace / name,
                      ignore_errors=True)
        return existed

