"""PipelineRun handler of the local backend (see runner.py for the runner)."""

from __future__ import annotations

import itertools
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
    output. A task reused from the cache ran nothing in this run: its lines are a header
    naming the execution it reused (run and task) and that execution's log, as KFP's UI
    links a cached task to the execution whose outputs it reused."""
    meta = obj["metadata"]  # the run folder, never a path read back from the stored object
    lines = iter_log(backend.store.run_path("PipelineRun", meta["name"],
                                            meta.get("namespace", "default")) / "run.log")
    cached = [t for t in shapes.tasks(obj) if t.get("cached")]
    if cached:
        lines = itertools.chain(lines, *(_reused(backend, obj, t) for t in cached))
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


def _reused(backend: Any, obj: dict[str, Any], task: dict[str, Any]) -> Iterator[str]:
    """A cached task's lines for the run log (`[path] ` prefixed): what it reused and that
    execution's log, kept in its task folder (cache.py), else still in its run's log."""
    path = shapes.task_path(task)
    prefix = f"[{path}] "
    came = task.get("cached_from") if isinstance(task.get("cached_from"), dict) else {}
    run_id, source = str(came.get("run_id") or ""), str(came.get("task") or "")
    run = str(came.get("run") or "") or _run_named(backend, obj, run_id)
    what = f"run {run}, task {source}" if run else f"task {source} of run id {run_id}"
    if not run_id or not source:
        yield (prefix + "kflab: reused from the cache (SKIPPED, cached): this task did not "
               "run here, and the record does not say which execution it reused")
        return
    if run and run == obj["metadata"]["name"]:
        what = f"run {run} (its earlier run under this name), task {source}"
    found = _kept_log(backend, obj, run_id, source)
    if found is None:
        found = _old_run_log(backend, obj, run, run_id, source)
    if found is None:
        yield (prefix + f"kflab: reused from the cache (SKIPPED, cached): its outputs come "
               f"from {what}, whose log is gone (that run was deleted or run again)")
        return
    yield (prefix + f"kflab: reused from the cache (SKIPPED, cached): this task did not run "
           f"here; the log below is that of the execution it reused: {what}")
    yield from (prefix + line for line in found)


def _kept_log(backend: Any, obj: dict[str, Any], run_id: str,
              source: str) -> list[str] | None:
    """The log kept in the reused execution's task folder; None when there is none (an
    execution cached before logs were kept there)."""
    from lab import state
    from lab.backends.pipeline_memo import TASK_LOG, artifacts_root

    try:
        root = artifacts_root(backend.root, obj["metadata"].get("namespace", "default"))
        log = state.path(root, run_id, *source.split("/"), TASK_LOG)
    except LabError:
        return None
    return list(iter_log(log)) if log.is_file() else None


def _run_named(backend: Any, obj: dict[str, Any], run_id: str) -> str:
    """The name of the stored run whose id is `run_id` ('' when none is)."""
    if not run_id:
        return ""
    namespace = obj["metadata"].get("namespace", "default")
    for other in backend.store.list("PipelineRun", namespace):
        if (other.get("status") or {}).get("run_id") == run_id:
            return str(other["metadata"]["name"])
    return ""


def _old_run_log(backend: Any, obj: dict[str, Any], run: str, run_id: str,
                 source: str) -> list[str] | None:
    """The reused task's lines in its own run's log, while that run is stored unchanged;
    None when it is not (deleted, or run again under its name)."""
    namespace = obj["metadata"].get("namespace", "default")
    try:
        other = backend.store.get("PipelineRun", run, namespace) if run else None
    except LabError:
        return None
    if other is None or (other.get("status") or {}).get("run_id") != run_id:
        return None
    lines = iter_log(backend.store.run_path("PipelineRun", run, namespace) / "run.log")
    return list(pipelines.task_lines(lines, source))
