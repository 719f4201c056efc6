"""Pipeline runs on a cluster: compiled for the lab's KFP server, submitted and followed
through its v2beta1 API, read back into the PipelineRun shape (lab/backends/shapes.py).

Everything goes through port-forwards on 127.0.0.1 to Services of the `kubeflow` namespace
(KFP single-user): ml-pipeline:8888 (the API), metadata-grpc-service:8080 (ML Metadata, for
output parameters, metrics and artifact URIs) and seaweedfs:8333 (the S3 object store, for
the artifact files, copied under <state>/cluster/runs/RUN_ID/). Runs are grouped in one KFP
experiment per lab namespace; a name means its newest run, and re-running a name replaces
(deletes) the older runs of that name, as the local backend replaces its record.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import state
from lab.backends import shapes
from lab.errors import LabError, NotFound
from lab.state import read_json, write_json

KFP_NAMESPACE = "kubeflow"
API_SERVICE, API_PORT = "ml-pipeline", 8888
MLMD_SERVICE, MLMD_PORT = "metadata-grpc-service", 8080
STORE_SERVICE, STORE_PORT = "seaweedfs", 8333
STORE_SECRET = "mlpipeline-minio-artifact"  # noqa: S105 - a Secret's name
RUN_TIMEOUT = 3600.0
POLL = 2.0
# Argo's bookkeeping nodes in a KFP 2.16 run's task_details, not pipeline steps
# (backend/src/v2/compiler/argocompiler/dag.go DAG, container.go addContainerExecutorTemplate)
BOOKKEEPING = ("root", "root-driver", "executor")
NODE_ID_ANNOTATION = "workflows.argoproj.io/node-id"  # Argo v3.7 workflowpod.go createWorkflowPod


def _forward(backend: Any, service: str, port: int) -> str:
    """A 127.0.0.1 URL forwarded to `service:port` in kubeflow, kept for the backend's life."""
    from lab.kube.portforward import forward

    cache = backend.__dict__.setdefault("_forwards", {})
    key = (service, port)
    if key not in cache:
        stack = backend.__dict__.setdefault("_forward_stack", contextlib.ExitStack())
        fwd = stack.enter_context(forward(backend.kube, KFP_NAMESPACE, f"svc/{service}", port))
        cache[key] = fwd.url
    return str(cache[key])


def api(backend: Any) -> Any:
    from lab.backends.cluster.pipelines.kfp_api import KfpApi

    return KfpApi(_forward(backend, API_SERVICE, API_PORT))


def _record_file(backend: Any, namespace: str, name: str) -> Path:
    from lab.kube.names import check_name

    check_name(name, "pipeline run name")
    return state.path(backend.root, "cluster", "pipelineruns", namespace, f"{name}.json")


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    from lab.backends.cluster.pipelines.compile import compile_for_server

    meta, spec = obj["metadata"], obj.get("spec") or {}
    name, ns = meta["name"], meta["namespace"]
    if not spec.get("pipeline"):
        from lab.errors import InputError

        raise InputError(None, "spec.pipeline", "a PipelineRun needs a pipeline file",
                         hint="set spec.pipeline: path/to/pipeline.py")
    path = (base_dir / spec["pipeline"]).resolve()
    record = _record_file(backend, ns, name)
    from lab.backends.cluster.pipelines.index import class_index

    # every step installs from the class index when the lab has one (an offline class)
    ir = compile_for_server(path, spec.get("function"), record.with_suffix(".ir.json"),
                            index=class_index(backend.kube))
    if backend.dry_run:  # compiled and checked for the server; nothing submitted
        return shapes.pipeline_run(name, spec, ns, shapes.run_status(
            run_id="", display_name=name,
            pipeline_name=str((ir.get("pipelineInfo") or {}).get("name", "")),
            state="PENDING", created_at=None))
    kfp = api(backend)
    exp_id = kfp.experiment_id(ns)
    for old in kfp.runs(exp_id, name):
        kfp.delete_run(old["run_id"])
    run = kfp.create_run(name, exp_id, ir, spec.get("arguments") or {})
    write_json(record, {"spec": spec, "run_id": run["run_id"], "experiment_id": exp_id})
    tasks = [t for t in (ir.get("root") or {}).get("dag", {}).get("tasks", {})]
    backend.emit({"event": "run-started", "run": name, "tasks": tasks})
    if wait:
        run = _follow(backend, kfp, run["run_id"], name)
    return shape(backend, run, ns, spec)


def _ir_task_names(ir: dict[str, Any]) -> list[str]:
    """Every task name of the pipeline's DAGs (the root's and its sub-DAG components')."""
    names = dict.fromkeys(((ir.get("root") or {}).get("dag") or {}).get("tasks") or {})
    for comp in (ir.get("components") or {}).values():
        names.update(dict.fromkeys(((comp or {}).get("dag") or {}).get("tasks") or {}))
    return list(names)


def pipeline_tasks(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's pipeline steps among its task_details, one per name, by start time.
    KFP 2.16 reports every Argo node of the run (api_converter.go toModelTasks): per step
    a `<task>-driver` pod, a DAG node named as the task and its `executor` pod, plus
    `root-driver`, `root`, the workflow's own node, and (caching on) the launcher's
    nameless cache rows. The step is the DAG node named as the task."""
    rows = (run.get("run_details") or {}).get("task_details") or []
    wanted = _ir_task_names(run.get("pipeline_spec") or {})
    if not wanted:  # without the IR: a step is a name with a `<name>-driver` beside it
        names = {str(t.get("display_name") or "") for t in rows}
        wanted = sorted({n[:-len("-driver")] for n in names if n.endswith("-driver")} - {
            *BOOKKEEPING})
    out: dict[str, dict[str, Any]] = {}
    for t in rows:
        name = str(t.get("display_name") or "")
        if name not in wanted:
            continue
        if name not in out or (t.get("start_time") or "") >= (out[name].get("start_time") or ""):
            out[name] = t
    order = {n: i for i, n in enumerate(_ir_task_names(run.get("pipeline_spec") or {}))}
    return sorted(out.values(), key=lambda t: (str(t.get("start_time") or "~"),
                                               order.get(str(t.get("display_name")), 0),
                                               str(t.get("display_name"))))


def _follow(backend: Any, kfp: Any, run_id: str, name: str) -> dict[str, Any]:
    """Poll the run until it ends, reporting task state changes as progress events."""
    deadline = time.monotonic() + RUN_TIMEOUT
    seen: dict[str, str] = {}
    while True:
        run = kfp.get_run(run_id)
        for t in pipeline_tasks(run):
            tname, state = t.get("display_name", ""), t.get("state", "")
            if seen.get(tname) == state:
                continue
            if state == "RUNNING":
                backend.emit({"event": "task-started", "task": tname})
            elif state in shapes.FINAL_STATES:
                backend.emit({"event": "task-finished", "task": tname, "state": state})
            seen[tname] = state
        if run.get("state") in shapes.FINAL_STATES:
            backend.emit({"event": "run-finished", "run": name, "state": run["state"]})
            return run
        if time.monotonic() > deadline:
            raise LabError(f"pipeline run {name} did not finish in {RUN_TIMEOUT:g}s "
                           f"(state {run.get('state')})",
                           hint=f"follow it with `kflab get run {name}` or the KFP UI")
        time.sleep(POLL)


def _store_credentials(backend: Any) -> tuple[str, str]:
    from lab.kube.objects import Ref, get

    secret = get(backend.kube, Ref("v1", "Secret", STORE_SECRET, KFP_NAMESPACE))
    data = (secret or {}).get("data") or {}
    try:
        return (base64.b64decode(data["accesskey"]).decode(),
                base64.b64decode(data["secretkey"]).decode())
    except (KeyError, ValueError):
        raise LabError(f"Secret {KFP_NAMESPACE}/{STORE_SECRET} has no accesskey/secretkey",
                       hint="KFP's object store credentials live there") from None


def _outputs(backend: Any, run: dict[str, Any], tasks: list[dict[str, Any]]
             ) -> dict[str, dict[str, Any]]:
    """display name -> outputs (parameters, metrics, artifacts fetched to the state folder),
    from ML Metadata: KFP's API has none (task_details carry no execution id or outputs)."""
    from lab.backends.cluster.pipelines.mlmd import Mlmd
    from lab.backends.cluster.pipelines.objectstore import fetch

    names = {str(t.get("display_name")) for t in tasks}
    if not names:
        return {}
    target = _forward(backend, MLMD_SERVICE, MLMD_PORT).removeprefix("http://")
    client = Mlmd(target)
    try:
        by_task = {n: i for n, i in client.run_executions(str(run["run_id"])).items()
                   if n in names}
        by_exec = {i: n for n, i in by_task.items()}
        found = client.outputs(list(by_exec)) if by_exec else {}
    finally:
        client.close()
    store_url, creds = None, None
    out: dict[str, dict[str, Any]] = {}
    for exec_id, outs in found.items():
        tname = by_exec[exec_id]
        metrics: dict[str, Any] = {}
        artifacts = {}
        for aname, art in outs.artifacts.items():
            meta = {k: v for k, v in art["metadata"].items() if k != "display_name"}
            if art["type"] == "system.Metrics":
                metrics.update(meta)
            # names from the API server are checked part by part, confined to the state folder
            dest = state.path(backend.root, "cluster", "runs", str(run["run_id"]), tname, aname)
            path = None
            if art["uri"]:
                if not dest.exists():
                    store_url = store_url or _forward(backend, STORE_SERVICE, STORE_PORT)
                    creds = creds or _store_credentials(backend)
                    try:
                        fetch(store_url, art["uri"], dest, *creds)
                    except LabError as exc:
                        backend.say(f"artifact {aname} of {tname}: {exc}")
                path = dest if dest.exists() else None
            artifacts[aname] = shapes.artifact_entry(art["type"], art["uri"], path, meta)
        out[tname] = shapes.task_outputs(outs.parameters, metrics, artifacts)
    return out


def shape(backend: Any, run: dict[str, Any], namespace: str,
          spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The PipelineRun object for a KFP run (final runs are cached in the state folder)."""
    name = run.get("display_name", "")
    cache = state.path(backend.root, "cluster", "runs", str(run.get("run_id")), "shape.json")
    cached = read_json(cache)
    if cached is not None:
        return cached
    raw = pipeline_tasks(run)
    outputs = _outputs(backend, run, raw) if run.get("state") in shapes.FINAL_STATES else {}
    tasks = [shapes.task_detail(t["display_name"], t.get("state", "PENDING"),
                                start_time=t.get("start_time"), end_time=t.get("end_time"),
                                outputs=outputs.get(t["display_name"]))
             for t in raw]
    ir = run.get("pipeline_spec") or {}
    status = shapes.run_status(
        run_id=str(run.get("run_id")), display_name=name,
        pipeline_name=str((ir.get("pipelineInfo") or {}).get("name", "")),
        state=str(run.get("state", "RUNTIME_STATE_UNSPECIFIED")),
        created_at=run.get("created_at"), finished_at=run.get("finished_at"),
        error=(run.get("error") or {}).get("message"), tasks=tasks,
        experiment_id=run.get("experiment_id"))
    obj = shapes.pipeline_run(name, spec or {}, namespace, status)
    obj["metadata"]["creationTimestamp"] = run.get("created_at")
    if run.get("state") in shapes.FINAL_STATES:
        write_json(cache, obj)
    return obj


def _runs(backend: Any, namespace: str, name: str | None = None) -> list[dict[str, Any]]:
    kfp = api(backend)
    exp_id = kfp.find_experiment(namespace)
    return [] if exp_id is None else kfp.runs(exp_id, name)


def get(backend: Any, name: str, namespace: str) -> dict[str, Any] | None:
    runs = _runs(backend, namespace, name)
    if not runs:
        return None
    record = read_json(_record_file(backend, namespace, name)) or {}
    return shape(backend, api(backend).get_run(runs[0]["run_id"]), namespace,
                 record.get("spec"))


def list_(backend: Any, namespace: str | None) -> list[dict[str, Any]]:
    ns = namespace or backend.namespace
    newest: dict[str, dict[str, Any]] = {}
    for run in _runs(backend, ns):
        newest.setdefault(run.get("display_name", ""), run)
    return [shape(backend, api(backend).get_run(r["run_id"]), ns) for r in newest.values()]


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    runs = _runs(backend, namespace, name)
    kfp = api(backend)
    for run in runs:
        kfp.delete_run(run["run_id"])
    _record_file(backend, namespace, name).unlink(missing_ok=True)
    return bool(runs)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    """The run's pods (KFP puts the label pipeline/runid on every pod of the run's workflow:
    apiserver/template/v2_template.go, SetPodMetadataLabels), their `main` container;
    `replica` names one task: its executor pod, found from the node ids KFP's API lists as
    the task's child_tasks (api_converter.go toApiPipelineTaskDetail), matched to the pod's
    Argo annotation workflows.argoproj.io/node-id (or, failing that, to the pod name Argo
    derives from the node id, `<workflow>-<template>-<hash>` under POD_NAMES=v2)."""
    from lab.backends.cluster.common import pod_lines
    from lab.kube.logs import pods

    runs = _runs(backend, namespace, name)
    if not runs:
        raise NotFound(f"no pipeline run named '{name}'",
                       hint="list them with `kflab get runs`")
    selector = f"pipeline/runid={runs[0]['run_id']}"
    only = None
    if replica is not None:
        tasks = pipeline_tasks(api(backend).get_run(runs[0]["run_id"]))
        task = next((t for t in tasks if t.get("display_name") == replica), None)
        if task is None:
            raise LabError(f"pipeline run '{name}' has no task '{replica}'",
                           hint="its tasks: " + (", ".join(str(t.get("display_name"))
                                                           for t in tasks) or "none yet"))
        nodes = {str(c.get("pod_name")) for c in task.get("child_tasks") or []
                 if c.get("pod_name")}
        only = {p["metadata"]["name"] for p in pods(backend.kube, KFP_NAMESPACE, selector)
                if _pod_of(p, nodes)}
        if not only:
            raise LabError(f"no pod of task '{replica}' of run '{name}' yet "
                           f"(Argo nodes {', '.join(sorted(nodes)) or 'none'})",
                           hint=f"`kflab get run {name}` shows whether it started; "
                                f"`kflab logs run {name}` shows every pod of the run")
    return pod_lines(backend, KFP_NAMESPACE, selector, container="main", only=only, **opts)


def _pod_of(pod: dict[str, Any], node_ids: set[str]) -> bool:
    """Whether `pod` runs one of the Argo nodes `node_ids`."""
    meta = pod.get("metadata") or {}
    node = (meta.get("annotations") or {}).get(NODE_ID_ANNOTATION)
    if node is not None:
        return node in node_ids
    pod_name = str(meta.get("name", ""))
    for nid in node_ids:  # POD_NAMES=v2: <workflow>-<template>-<hash>, node id <workflow>-<hash>
        wf, _, digest = nid.rpartition("-")
        if wf and pod_name.startswith(f"{wf}-") and pod_name.endswith(f"-{digest}"):
            return True
    return False
