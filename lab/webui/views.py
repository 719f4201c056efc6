"""The JSON the UI's pages draw, read from the backend API the CLI uses (`lab/backends/base.py`:
`list`, `get`, `logs`), so the UI shows what `kflab get` shows, on either backend. Pipeline
runs: run_page.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lab.kube.katib import objective_column
from lab.webui import run_page
from lab.webui.run_page import NotFound, Page

__all__ = ["NotFound", "Page", "answer"]

LISTED = {"jobs": ("PyTorchJob", "TFJob", "TrainJob"), "inferenceservices": ("InferenceService",),
          "notebooks": ("Notebook",), "experiments": ("Experiment",)}
MAX_LOG_LINES = run_page.MAX_LOG_LINES


def answer(backend: Any, api: Any, path: str, root: Path | None = None,
           query: dict[str, str] | None = None) -> Any:
    """`info`, `runs`, `runs/RUN` (RUN: a name or a KFP run id), `runs/RUN/tasks/TASK`,
    `runs/RUN/logs/TASK`, `runs/RUN/artifacts/TASK/OUTPUT` (`?download=1`: the file),
    `experiments`, `experiments/NAME`, `experiments/NAME/trials/TRIAL`, `jobs`,
    `jobs/KIND/NAME[/REPLICA]`, `inferenceservices[/NAME]`, `notebooks`, `labs`, `labs/ID`
    (the guided labs' progress in the state folder `root`). Each part of the path is
    percent-decoded once, after the path is split (a task's path `a/b` comes as `a%2Fb`).
    A name the backend refuses (`..%2f`, a NUL, 5000 characters) is no such object."""
    from lab.errors import InputError

    try:
        return _answer(backend, api, path, root, query or {})
    except InputError as exc:
        raise NotFound(exc.problem) from None


def _answer(backend: Any, api: Any, path: str, root: Path | None,
            query: dict[str, str]) -> Any:
    parts = [unquote(p) for p in path.split("/") if p]
    if parts == ["info"]:  # what the page asks once: is the KFP API here (local backend)
        return {"backend": getattr(backend, "name", ""), "kfp_api": api is not None}
    if parts and parts[0] == "labs" and len(parts) <= 2 and root is not None:
        from lab.webui import progress

        try:
            return progress.page(root, parts[1]) if len(parts) == 2 else progress.listing(root)
        except progress.Unknown as exc:
            raise NotFound(str(exc)) from None
    if parts == ["runs"]:
        return [run_page.run_row(o) for o in _newest(_listed(backend, "PipelineRun"))]
    if len(parts) == 2 and parts[0] == "runs":
        return run_page.run_page(backend, api, parts[1])
    if len(parts) == 5 and parts[0] == "runs" and parts[2] == "artifacts":
        return run_page.artifact_page(backend, api, parts[1], parts[3], parts[4],
                                      download=query.get("download") == "1")
    if len(parts) == 4 and parts[0] == "runs" and parts[2] == "logs":
        return {"lines": run_page.log_lines(backend, api, parts[1], parts[3])}
    if len(parts) == 4 and parts[0] == "runs" and parts[2] == "tasks":
        return run_page.task_panel(backend, api, parts[1], parts[3])
    if len(parts) == 4 and parts[0] == "pipelines" and parts[2] == "versions":
        return _version_spec(api, parts[1], parts[3])
    if len(parts) == 2 and parts[0] == "experiments":
        return _experiment_page(backend, parts[1])
    if len(parts) == 4 and parts[0] == "experiments" and parts[2] == "trials":
        return _trial_page(backend, parts[1], parts[3])
    if len(parts) in (3, 4) and parts[0] == "jobs":
        return _job_page(backend, *parts[1:])
    if len(parts) == 2 and parts[0] == "inferenceservices":
        return _isvc_page(backend, parts[1], local=api is not None)
    if len(parts) == 1 and parts[0] in LISTED:
        rows = []
        for kind in LISTED[parts[0]]:
            rows += [_row(kind, o) for o in _newest(_listed(backend, kind))]
        return rows
    raise NotFound(f"no view '{path}'")


def _version_spec(api: Any, pid: str, vid: str) -> dict[str, Any]:
    """A pipeline version's spec as YAML and its graph (lab/backends/pipeline_graph.py), for
    the pipeline page: read through the local KFP API's own GET (what kfp.Client reads)."""
    import yaml

    from lab.backends.pipeline_graph import graph
    from lab.webui.kfp_api import PREFIX

    if api is None:
        raise NotFound("pipelines are the local backend's KFP API (kflab open pipelines on a "
                       "cluster)")
    status, version = api.handle("GET", f"{PREFIX}/pipelines/{pid}/versions/{vid}", {}, "", b"")
    if status != 200 or not isinstance(version, dict):
        raise NotFound(str((version or {}).get("message") or f"no pipeline version {vid}"))
    spec = version.get("pipeline_spec")
    docs = [spec["pipeline_spec"], spec.get("platform_spec")] if isinstance(spec, dict) and \
        isinstance(spec.get("pipeline_spec"), dict) else [spec]
    text = yaml.safe_dump_all([d for d in docs if d], sort_keys=False, width=100)
    return {"graph": graph(spec), "yaml": text[:2_000_000]}


def _listed(backend: Any, kind: str) -> list[dict[str, Any]]:
    try:
        return backend.list(kind)
    except Exception:  # a kind this backend cannot list (no CRD on the cluster): no rows
        return []


def _newest(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(objs, key=lambda o: o["metadata"].get("creationTimestamp") or "",
                  reverse=True)


def _row(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    last = next((c for c in reversed(conditions) if c.get("status") == "True"), None)
    row = {"kind": kind, "name": obj["metadata"]["name"],
           "namespace": obj["metadata"].get("namespace", "default"),
           "state": (last or {}).get("type") or status.get("state") or "",
           "created_at": obj["metadata"].get("creationTimestamp")}
    if kind == "Experiment":
        row["trials"] = status.get("trials", 0)
        row["best"] = ((status.get("currentOptimalTrial") or {}).get("bestTrialName")) or ""
    if kind == "InferenceService":
        row["url"] = status.get("url") or ""
    if kind == "Notebook":  # its URL carries the server's token: `kflab open` prints it
        row["ready"] = status.get("readyReplicas") == 1
        row["open"] = f"kflab open notebook {obj['metadata']['name']}"
    if kind in ("PyTorchJob", "TFJob"):
        row["replicas"] = _replica_types(kind, obj)
    if kind == "TrainJob":  # Trainer v2 writes counts per replicated Job (jobsStatus)
        row["replicas"] = [{"type": str(j.get("name", "")), **{
            k: int(j.get(k) or 0) for k in ("ready", "active", "succeeded", "failed",
                                            "suspended")}}
            for j in status.get("jobsStatus") or [] if isinstance(j, dict)]
        if not last:  # no condition until it ends: the node Job's counts say how it goes
            from lab.backends.local.training.sdk import node_phase

            row["state"] = node_phase(obj)
    return row


REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}


def _job_page(backend: Any, kind: str, name: str, replica: str | None = None
              ) -> dict[str, Any]:
    """A training job: its replicas (type-index, as `kflab logs --replica` names them) and,
    for one replica, its log."""
    from collections import deque

    from lab.errors import LabError

    if kind not in (*REPLICA_SPECS, "TrainJob"):
        raise NotFound(f"no job kind '{kind}'")
    obj = backend.get(kind, name)
    if obj is None:
        raise NotFound(f"no {kind} '{name}'")
    out = _trainjob_page(backend, obj) if kind == "TrainJob" else _replica_page(kind, obj)
    if replica is not None:
        try:
            out["log"] = [line.rstrip("\n") for line in deque(
                backend.logs(kind, name, replica=replica), maxlen=MAX_LOG_LINES)]
        except LabError as exc:
            raise NotFound(str(exc)) from None
        out["replica"] = replica
    return out


def _message(obj: dict[str, Any]) -> str:
    return next((c.get("message", "") for c in reversed(
        (obj.get("status") or {}).get("conditions") or []) if c.get("status") == "True"), "")


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _replica_types(kind: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Each replica type of a Training Operator job once: how many replicas the spec asks
    for, and the counts the operator writes for the type (replicaStatuses: active,
    succeeded, failed; its labelSelector is left out)."""
    specs = (obj.get("spec") or {}).get(REPLICA_SPECS[kind]) or {}
    statuses = (obj.get("status") or {}).get("replicaStatuses") or {}
    out = []
    for rtype in [*specs, *(t for t in statuses if t not in specs)]:
        spec = specs.get(rtype) if isinstance(specs.get(rtype), dict) else {}
        st = statuses.get(rtype) if isinstance(statuses.get(rtype), dict) else {}
        out.append({"type": str(rtype), "replicas": _count(spec.get("replicas", 1)),
                    **{k: _count(st.get(k)) for k in ("active", "succeeded", "failed")}})
    return out


def _replica_page(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A Training Operator job: the counts of each replica type once (replicaStatuses counts
    a type, not a replica), and its replicas (type-index) to pick a log from."""
    replicas = [{"name": f"{t['type'].lower()}-{i}", "type": t["type"]}
                for t in _replica_types(kind, obj) for i in range(t["replicas"])]
    return {**_row(kind, obj), "replica_list": replicas, "message": _message(obj)}


def _trainjob_page(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """A TrainJob (Kubeflow Trainer v2): its runtime, and each node (`node-0`, `node-1`, as
    `kflab logs --replica` names them) with its pod's phase. Trainer's status has no per-node
    state (only jobsStatus counts per replicated Job), so the phase is the pod's: read from
    the cluster, or on the local backend derived from the status as the local TrainerClient
    derives it (lab/backends/local/training/sdk.py)."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    trainer = spec.get("trainer") or {}
    if getattr(backend, "name", "") == "cluster":
        from lab.backends.cluster.training.trainjob import nodes
        from lab.errors import LabError

        try:
            found = nodes(backend, meta["name"], meta.get("namespace", "default"))
        except LabError:  # pods not readable (RBAC, gone): the counts still show
            found = []
    else:
        from lab.backends.local.training import sdk

        found = sdk.nodes(obj)
    replicas = [{"name": f"node-{n['index']}", "type": "Node", "pod": n["pod"],
                 "phase": n["phase"], "restarts": n.get("restarts")} for n in found]
    return {**_row("TrainJob", obj), "replica_list": replicas, "message": _message(obj),
            "runtime": (spec.get("runtimeRef") or {}).get("name", ""),
            "num_nodes": trainer.get("numNodes") or len(replicas),
            "nproc_per_node": trainer.get("numProcPerNode", ""),
            "jobs_status": (obj.get("status") or {}).get("jobsStatus") or []}


def _experiment_page(backend: Any, name: str) -> dict[str, Any]:
    exp = backend.get("Experiment", name)
    if exp is None:
        raise NotFound(f"no experiment '{name}'")
    trials = [t for t in _listed(backend, "Trial")
              if (t["metadata"].get("labels") or {}).get("katib.kubeflow.org/experiment")
              == name or t["metadata"]["name"].startswith(f"{name}-")]
    trials.sort(key=lambda t: t["metadata"].get("creationTimestamp") or "")
    spec = exp.get("spec") or {}
    objective = spec.get("objective") or {}
    rows = []
    for t in trials:
        value = objective_column(t)
        rows.append({**_row("Trial", t), "parameters": _assignments(t),
                     "metrics": _observed(t),
                     "objective": float(value) if _number(value) else None})
    status = exp.get("status") or {}
    return {**_row("Experiment", exp), "metric": objective.get("objectiveMetricName", ""),
            "goal": objective.get("type", ""), "trials": rows,
            # a column per parameter, in the spec's order (Katib UI's trials table)
            "parameter_names": [str(p.get("name")) for p in spec.get("parameters") or []
                                if isinstance(p, dict) and p.get("name")],
            "metric_names": [objective.get("objectiveMetricName", ""), *[
                str(m) for m in objective.get("additionalMetricNames") or []]],
            "algorithm": ((spec.get("algorithm") or {}).get("algorithmName")) or "",
            "counts": {k: _count(status.get(k)) for k in (
                "trials", "trialsRunning", "trialsSucceeded", "trialsFailed",
                "trialsKilled", "trialsEarlyStopped", "trialMetricsUnavailable")},
            "max_trials": spec.get("maxTrialCount"),
            "parallel_trials": spec.get("parallelTrialCount"),
            "message": _message(exp)}


def _assignments(trial: dict[str, Any]) -> dict[str, Any]:
    return {a.get("name"): a.get("value") for a in
            (trial.get("spec") or {}).get("parameterAssignments") or [] if isinstance(a, dict)}


def _observed(trial: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{metric: {latest, min, max}} of the trial's observation (what Katib's metrics collector
    reported), as the Katib UI's trial page lists them."""
    out = {}
    for m in ((trial.get("status") or {}).get("observation") or {}).get("metrics") or []:
        if isinstance(m, dict) and m.get("name"):
            out[str(m["name"])] = {k: m.get(k) for k in ("latest", "min", "max") if k in m}
    return out


def _trial_page(backend: Any, experiment: str, name: str) -> dict[str, Any]:
    """One Katib trial: its parameters, observed metrics, conditions and the last lines of
    its log (`kflab logs trial/NAME`)."""
    from collections import deque

    from lab.errors import LabError

    page = _experiment_page(backend, experiment)
    trial = backend.get("Trial", name)
    if trial is None or name not in {t["name"] for t in page["trials"]}:
        raise NotFound(f"experiment '{experiment}' has no trial '{name}'")
    status = trial.get("status") or {}
    try:
        log = [line.rstrip("\n") for line in deque(backend.logs("Trial", name),
                                                    maxlen=MAX_LOG_LINES)]
    except LabError:
        log = None  # no log (yet, or the pod is gone)
    row = next(t for t in page["trials"] if t["name"] == name)
    return {**row, "experiment": experiment, "metric": page["metric"], "goal": page["goal"],
            "best": page["best"] == name, "message": _message(trial),
            "start_time": status.get("startTime"), "completion_time": status.get("completionTime"),
            "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message",
                                                  "lastTransitionTime")}
                           for c in status.get("conditions") or [] if isinstance(c, dict)],
            "log": log}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _isvc_page(backend: Any, name: str, local: bool) -> dict[str, Any]:
    """One InferenceService and what its try-it form needs: the protocol its model speaks
    (a V2-only runtime gets V2 first) and whether the form can send (local backend only)."""
    obj = backend.get("InferenceService", name)
    if obj is None:
        raise NotFound(f"no InferenceService '{name}'")
    model = (((obj.get("spec") or {}).get("predictor") or {}).get("model") or {})
    declared = str(model.get("protocolVersion") or "v1")
    fmt = (model.get("modelFormat") or {}).get("name", "")
    return {**_row("InferenceService", obj), "format": fmt, "protocol": declared,
            "runtime": model.get("runtime") or "",
            "protocols": ["v2"] if model.get("runtime") == "kserve-mlserver" else ["v1", "v2"],
            "can_try": local,
            "message": next((c.get("message", "") for c in reversed(
                (obj.get("status") or {}).get("conditions") or [])
                if c.get("type") == "Ready"), "")}
