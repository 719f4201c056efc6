"""PipelineRun handler of the local backend (see pipelines.py for the runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.local.pipelines import runner as pipelines
from lab.backends.local.procs import iter_log


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    meta = obj["metadata"]
    run_dir = backend.store.run_dir("PipelineRun", meta["name"], meta["namespace"])
    return pipelines.run(obj, run_dir, base_dir, backend.store.put, backend.emit)


def delete(backend: Any, obj: dict[str, Any]) -> None:
    """Nothing keeps running after a local pipeline run: the store drops its folder."""


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    log = (obj.get("status") or {}).get("log")
    return iter_log(Path(log)) if log else iter(())
