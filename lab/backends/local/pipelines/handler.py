"""PipelineRun handler of the local backend (see runner.py for the runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends import shapes
from lab.backends.local.owners import Lease
from lab.backends.local.pipelines import runner as pipelines
from lab.backends.local.procs import iter_log
from lab.errors import LabError
from lab.kube.conditions import now

ACTIVE = ("RUNNING", "PENDING")


def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    """The run's spec and its pipeline, checked before anything is replaced or runs (a .py
    pipeline is code: it is imported here, to compile it)."""
    pipelines.prepare(obj, base_dir, backend.root)


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          lease: Lease) -> dict:
    meta = obj["metadata"]
    run_dir = backend.store.run_dir("PipelineRun", meta["name"], meta["namespace"])
    return pipelines.run(obj, run_dir, base_dir, backend.store.put, backend.emit, lease=lease,
                         store_root=backend.root)


def delete(backend: Any, obj: dict[str, Any]) -> None:
    """The backend has already stopped the run's owner and its tasks; the store drops its
    run folder (record, logs). The run's task folders (its artifacts) go too, unless a cache
    entry still names them: KFP keeps what its cache reuses when a run is deleted."""
    from lab.backends.pipeline_memo import drop_run_artifacts

    run_id = str((obj.get("status") or {}).get("run_id") or "")
    drop_run_artifacts(backend.root, obj["metadata"].get("namespace", "default"), run_id)


def in_progress(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("state") in ACTIVE


def abandon(backend: Any, obj: dict[str, Any], why: str, save: bool = True) -> dict:
    """A run whose kflab process died: FAILED, as KFP reports a run whose driver is gone."""
    status = obj.setdefault("status", {})
    status["state"] = "FAILED"
    status["error"] = {"message": f"the run has failed because {why}"}
    status["finished_at"] = now()
    for task in (status.get("run_details") or {}).get("task_details") or []:
        if task.get("state") == "RUNNING":
            task["state"] = "FAILED"
        elif task.get("state") == "PENDING":
            task["state"] = "SKIPPED"
    if save:
        backend.store.put(obj)
    return obj


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    """The run's log (each line prefixed `[task] `); `replica` names one task: only its
    output."""
    meta = obj["metadata"]  # the run folder, never a path read back from the stored object
    lines = iter_log(backend.store.run_path("PipelineRun", meta["name"],
                                            meta.get("namespace", "default")) / "run.log")
    if replica is None:
        return lines
    try:
        path = shapes.find_task_path(obj, replica)
    except ValueError as several:
        raise LabError(f"pipeline run '{meta['name']}' has more than one task '{replica}' "
                       "(in different sub-DAGs)", hint=f"name one by its path: {several}"
                       ) from None
    if path is None:
        known = [shapes.task_path(t) for t in shapes.tasks(obj)]
        raise LabError(f"pipeline run '{meta['name']}' has no task '{replica}'",
                       hint="its tasks: " + (", ".join(known) or "none yet"))
    return pipelines.task_lines(lines, path)
