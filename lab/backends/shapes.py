"""Status shapes both backends write and checks, the CLI and reports read: one definition.

Kubernetes kinds (Experiment, Trial, PyTorchJob, InferenceService) carry the upstream CRD's
own `status`, so their shape is the CRD's and lives upstream. The one kflab kind,
`PipelineRun` (apiVersion kflab.dev/v1), records a KFP run; its `status` mirrors the KFP v2beta1
API's Run (`run_id`, `display_name`, `state`, `created_at`, `finished_at`, `error`,
`run_details.task_details[]` with `display_name`, `state`, `start_time`, `end_time`) and adds,
per task, where it runs (`parent`: the path of the DAG task a task in a sub-DAG runs in, as
KFP's `parent_task_id` names it by id; `task_path` below) and what KFP keeps in ML Metadata:
`outputs.parameters`, `outputs.metrics` and `outputs.artifacts` (name -> type, uri, local
path, exists, metadata). A task reused from KFP's cache has the state the KFP API gives it,
SKIPPED, with the reused outputs; the local backend adds `cached: true` (MLMD's CACHED
execution state on a cluster) and `cached_from` (the execution reused: `run`, `run_id`, `task`;
MLMD's `cached_execution_id`), and, for `kflab ui`, the run's own `start_time` and `end_time`
to the millisecond and the pipeline's nested DAGs (`graph`: lab/backends/pipeline_graph.py).
The local backend fills it from the executor outputs of its tasks; the cluster backend from
the KFP API and ML Metadata, with artifacts fetched from the object store into the state
folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PIPELINE_RUN_API = "kflab.dev/v1"
PIPELINE_RUN = "PipelineRun"
# KFP's RuntimeState values (v2beta1), final ones first.
FINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")
RUN_STATES = (*FINAL_STATES, "PENDING", "RUNNING", "CANCELING", "PAUSED",
              "RUNTIME_STATE_UNSPECIFIED")


def pipeline_run(name: str, spec: dict[str, Any], namespace: str = "default",
                 status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PipelineRun object: what `kflab pipeline run` and the `pipeline` action apply."""
    obj: dict[str, Any] = {"apiVersion": PIPELINE_RUN_API, "kind": PIPELINE_RUN,
                           "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def pipeline_run_manifest(file: str, name: str, arguments: dict[str, Any] | None = None,
                          function: str | None = None, *, parallelism: int | None = None,
                          cache: bool | None = None) -> dict[str, Any]:
    """The PipelineRun object that `kflab pipeline run` and the `pipeline` action apply
    (`cache: false` runs every task again, as KFP's enable_caching=False does)."""
    spec: dict[str, Any] = {"pipeline": file, "arguments": arguments or {}}
    if function:
        spec["function"] = function
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if cache is not None:
        spec["cache"] = cache
    obj = pipeline_run(name, spec)
    del obj["metadata"]["namespace"]  # the backend's default namespace
    return obj


def record_problem(obj: Any) -> str | None:
    """What makes a stored record unusable as a Kubernetes object (every reader indexes
    these); the local backend's store refuses such a record."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return "metadata.name: missing or not text"
    for key in ("spec", "status"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            return f"{key}: expected a mapping, got {type(obj[key]).__name__}"
    details = (obj.get("status") or {}).get("run_details")  # a PipelineRun's tasks
    if details is not None:
        if not isinstance(details, dict):
            return "status.run_details: expected a mapping"
        tasks = details.get("task_details")
        if not isinstance(tasks, list | None) or not all(isinstance(t, dict)
                                                         for t in tasks or []):
            return "status.run_details.task_details: expected a list of mappings"
    return None


def run_status(*, run_id: str, display_name: str, pipeline_name: str, state: str,
               created_at: str | None, finished_at: str | None = None,
               error: str | None = None, tasks: list[dict[str, Any]] | None = None,
               **extra: Any) -> dict[str, Any]:
    """The PipelineRun status: KFP's Run fields plus per-task outputs."""
    return {"run_id": run_id, "display_name": display_name, "pipeline_name": pipeline_name,
            "state": state, "created_at": created_at, "finished_at": finished_at,
            "error": {"message": error} if error else None, **extra,
            "run_details": {"task_details": list(tasks or [])}}


def task_detail(display_name: str, state: str, *, start_time: str | None = None,
                end_time: str | None = None,
                outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """One entry of run_details.task_details (outputs None until the task wrote any)."""
    out: dict[str, Any] = {"display_name": display_name, "state": state, "outputs": outputs}
    if start_time:
        out["start_time"] = start_time
    if end_time:
        out["end_time"] = end_time
    return out


def task_outputs(parameters: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                 artifacts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"parameters": dict(parameters or {}), "metrics": dict(metrics or {}),
            "artifacts": dict(artifacts or {})}


def artifact_entry(kind: str, uri: str, path: Path | None,
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """An output artifact: KFP type (system.Model...), its URI, and the local copy."""
    return {"type": kind, "uri": uri, "path": str(path) if path else None,
            "exists": bool(path and path.exists()), "metadata": dict(metadata or {})}


# --- readers (checks, CLI) ------------------------------------------------------------------

def state(run: dict[str, Any] | None) -> str | None:
    return ((run or {}).get("status") or {}).get("state")


def error_message(run: dict[str, Any] | None) -> str:
    return (((run or {}).get("status") or {}).get("error") or {}).get("message", "")


def tasks(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The run's task records; a hand-edited record's other shapes read as none."""
    details = ((run or {}).get("status") or {}).get("run_details")
    found = details.get("task_details") if isinstance(details, dict) else None
    return [t for t in found if isinstance(t, dict)] if isinstance(found, list) else []


def task_path(task: dict[str, Any]) -> str:
    """Where a task runs in its run: its display name under the DAG tasks it runs in
    (`parent`, written by the local engine for a task in a sub-DAG, as
    lab/backends/local/pipelines/engine.task_path builds it). Unique in a run where display
    names are not: a sub-pipeline used twice runs two tasks of one name."""
    parent, name = task.get("parent"), str(task.get("display_name"))
    return f"{parent}/{name}" if isinstance(parent, str) and parent else name


def find_task_path(run: dict[str, Any] | None, name: str) -> str | None:
    """The path of the task `name` names: a path, or a display name only one task has;
    None when no task has it. Raises ValueError with the paths when several tasks do."""
    found = tasks(run)
    paths = [task_path(t) for t in found]
    if name in paths:
        return name
    named = [p for t, p in zip(found, paths, strict=True) if t.get("display_name") == name]
    if len(named) > 1:
        raise ValueError(", ".join(named))
    return named[0] if named else None


def task(run: dict[str, Any] | None, display_name: str) -> dict[str, Any] | None:
    return next((t for t in tasks(run) if t.get("display_name") == display_name), None)


def artifact(run: dict[str, Any] | None, task_name: str, name: str) -> dict[str, Any] | None:
    """The output artifact `name` of task `task_name`, or None."""
    found = task(run, task_name)
    return (((found or {}).get("outputs") or {}).get("artifacts") or {}).get(name)


def relocate(path: Path, root: Path) -> Path:
    """A path a record holds, in the state folder `root` as it is now: a state folder moved
    with `mv` keeps records naming its old place (`OLD/pipeline-root/...`), whose files are
    now under `root`. A path inside `root`, or with no such part, is returned unchanged."""
    if path.is_absolute() and not path.is_relative_to(root):
        parts = path.parts
        for i in range(len(parts) - 1, 0, -1):
            if parts[i] in ("pipeline-root", "runs"):
                moved = root.joinpath(*parts[i:])
                if moved.exists():
                    return moved
    return path


def artifact_problem(entry: dict[str, Any] | None, task_name: str, name: str,
                     root: Path) -> str | None:
    """Why an artifact cannot count as produced (None when its local copy has content).

    The backend keeps every local copy in its state folder `root`; a record naming any other
    path (an edited or foreign record) is not looked at."""
    if not entry:
        return f"task '{task_name}' has no output artifact '{name}'"
    if not entry.get("path"):
        return f"artifact '{name}' of task '{task_name}' was not fetched ({entry.get('uri')})"
    path = relocate(Path(entry["path"]), root)
    if not path.resolve().is_relative_to(root.resolve()):
        return f"artifact '{name}' of task '{task_name}' is recorded outside the state folder"
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return f"artifact file {path} is missing or empty"
    return None
