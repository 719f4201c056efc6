"""STAND-IN for what a KFP 2.16 run looks like to the API server: the Argo Workflow's node
statuses (Argo v3.7 controller running the workflow that KFP's argocompiler made) and the
task rows the persistence agent's report turns them into. Pure functions, unit-tested
against upstream's own fixture (tests/unit/test_kfp_standin_report.py).

Upstream writers (kubeflow/pipelines 2.16.0, argoproj/argo-workflows v3.7.3):
- Workflow name: `<pipelineInfo.name>-` + 5 random characters (metadata.generateName,
  backend/src/v2/compiler/argocompiler/argo.go, Compile; the suffix is the API server's).
- Nodes per run: the workflow's own node (template `entrypoint`), `root-driver` (template
  system-dag-driver) and `root` (the root DAG, template `root`), from dag.go, DAG(); per IR
  task `<task>-driver` (system-container-driver) and `<task>` (a DAG, template
  system-container-executor) whose one DAG task `executor` runs system-container-impl
  (container.go, containerDriverTask / containerExecutorTask /
  addContainerExecutorTemplate).
- Node id: the workflow name for its own node, else `<workflow>-<fnv32a(node name)>`; node
  names are `<boundary>.<dag task name>` (Argo pkg/apis/workflow/v1alpha1/workflow_types.go,
  Workflow.NodeID; workflow/controller/dag.go).
- Children: a DAG's boundary node gets its tasks without dependencies; a task gets as parents
  the outbound nodes of the tasks it depends on (Argo workflow/controller/dag.go,
  connectDependencies); the KFP compiler makes `<task>` depend on `<task>-driver`, and
  `<task>-driver` on the upstream tasks (dag.go, task()).
- Pod names under Argo's default POD_NAMES=v2: `<workflow>-<template>-<fnv32a(node name)>`
  (workflow/util/pod_name.go, GeneratePodName); KFP derives the same name from a node
  (backend/src/common/util/workflow.go, RetrievePodName).
- Task rows: backend/src/apiserver/server/api_converter.go, toModelTasks (ExecutionSpec) and
  toModelTask (util.NodeStatus, filled by workflow.go NodeStatuses): PodName = RetrievePodName,
  Name = node displayName, State = phase (model/run.go ToV2), start/finish times, children =
  node children (node ids), CreatedTimestamp = the workflow's creation time; no execution id,
  no inputs/outputs. task_store.go CreateOrUpdateTasks adds a random UUID and a state
  history entry. toApiPipelineTaskDetail renders it in v2beta1: no pod_name, child_tasks
  carry the children's node ids as pod_name, execution_id 0 (left out of the JSON: the
  gateway's marshaler has EmitUnpopulated false, apiserver/common/utils.go CustomMarshaler).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

ZERO = -62135596800  # time.Time{}.Unix(): an unset Argo timestamp
STAMP = "%Y-%m-%dT%H:%M:%SZ"

# model/run.go, RuntimeState.ToV2 on an Argo phase (upper-cased)
PHASE_TO_V2 = {"PENDING": "PENDING", "RUNNING": "RUNNING", "SUCCEEDED": "SUCCEEDED",
               "SKIPPED": "SKIPPED", "FAILED": "FAILED", "ERROR": "FAILED"}


def fnv32a(text: str) -> int:
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def node_id(workflow: str, node_name: str) -> str:
    """Argo's Workflow.NodeID."""
    return workflow if node_name == workflow else f"{workflow}-{fnv32a(node_name)}"


def workflow_name(pipeline_name: str, run_id: str) -> str:
    """generateName `<pipeline name>-` plus Kubernetes' 5 random characters (here from the
    run id, so a run's name is stable)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet
    digest = hashlib.sha256(run_id.encode()).digest()
    return pipeline_name.rsplit("/", 1)[-1] + "-" + "".join(
        alphabet[b % len(alphabet)] for b in digest[:5])


def retrieve_pod_name(wf: dict[str, Any], node: dict[str, Any]) -> str:
    """KFP's RetrievePodName (common/util/workflow.go) for a POD_NAMES=v2 workflow."""
    name = wf["metadata"]["name"]
    if wf.get("apiVersion") == "v1" or (wf["metadata"].get("annotations") or {}).get(
            "workflows.argoproj.io/pod-name-format") == "v1":
        return str(node["id"])
    if node["name"] == name:
        return str(name)
    suffix = str(node["id"]).split("-")[-1]
    prefix = name if ".inline" in node["name"] else f"{name}-{node['templateName']}"
    return f"{prefix}-{suffix}"


def _stamp(seconds: float | None) -> str:
    if seconds is None or seconds <= ZERO:
        return "0001-01-01T00:00:00Z"
    return time.strftime(STAMP, time.gmtime(seconds))


def _unix(stamp: str | None) -> int:
    if not stamp or stamp.startswith("0001-"):
        return ZERO
    import calendar

    return calendar.timegm(time.strptime(stamp, STAMP))


def build_workflow(run_id: str, ir: dict[str, Any], tasks: dict[str, dict[str, Any]],
                   created: float, finished: float | None) -> dict[str, Any]:
    """The Argo Workflow (metadata and status.nodes) of a run of `ir`'s root DAG.
    `tasks`: IR task name -> {"phase": Argo phase, "started", "finished": epoch seconds};
    tasks missing from it were never scheduled (an upstream failed) and have no nodes."""
    pipeline = str((ir.get("pipelineInfo") or {}).get("name", "pipeline"))
    wf_name = workflow_name(pipeline, run_id)
    dag = ((ir.get("root") or {}).get("dag") or {}).get("tasks") or {}
    nodes: dict[str, dict[str, Any]] = {}

    def add(name: str, display: str, kind: str, template: str, phase: str,
            start: float | None, end: float | None, parent: list[str]) -> str:
        nid = node_id(wf_name, name)
        nodes[nid] = {"id": nid, "name": name, "displayName": display, "type": kind,
                      "templateName": template, "phase": phase, "startedAt": _stamp(start),
                      "finishedAt": _stamp(end), "children": []}
        for p in parent:
            if nid not in nodes[p]["children"]:
                nodes[p]["children"].append(nid)
        return nid

    phases = [t["phase"] for t in tasks.values()]
    overall = ("Running" if finished is None else
               "Failed" if any(p in ("Failed", "Error") for p in phases) else "Succeeded")
    end = finished
    top = add(wf_name, wf_name, "DAG", "entrypoint", overall, created, end, [])
    rdrv = add(f"{wf_name}.root-driver", "root-driver", "Pod", "system-dag-driver",
               "Succeeded", created, created, [top])
    root = add(f"{wf_name}.root", "root", "DAG", "root", overall, created, end, [rdrv])
    outbound: dict[str, str] = {}  # IR task -> its executor node (the task's outbound node)
    pending = [t for t in dag if t in tasks]
    while pending:  # in dependency order: parents before children
        ready = [t for t in pending
                 if all(d in outbound for d in dag[t].get("dependentTasks") or [])]
        if not ready:
            break
        for t in ready:
            info = tasks[t]
            deps = dag[t].get("dependentTasks") or []
            parents = [outbound[d] for d in deps] or [root]
            drv = add(f"{wf_name}.root.{t}-driver", f"{t}-driver", "Pod",
                      "system-container-driver", "Succeeded", info["started"],
                      info["started"], parents)
            box = add(f"{wf_name}.root.{t}", t, "DAG", "system-container-executor",
                      info["phase"], info["started"], info.get("finished"), [drv])
            outbound[t] = add(f"{wf_name}.root.{t}.executor", "executor", "Pod",
                              "system-container-impl", info["phase"], info["started"],
                              info.get("finished"), [box])
            pending.remove(t)
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": wf_name, "namespace": "kubeflow",
                         "creationTimestamp": _stamp(created),
                         "labels": {"pipeline/runid": run_id}},
            "status": {"phase": overall, "nodes": nodes}}


def model_tasks(wf: dict[str, Any]) -> list[dict[str, Any]]:
    """toModelTasks(ExecutionSpec): one model.Task per node, sorted by node id."""
    meta = wf["metadata"]
    out = []
    for nid in sorted(wf["status"]["nodes"]):
        node = wf["status"]["nodes"][nid]
        out.append({"PodName": retrieve_pod_name(wf, node),
                    "Namespace": meta.get("namespace", ""),
                    "RunID": (meta.get("labels") or {}).get("pipeline/runid", ""),
                    "CreatedTimestamp": _unix(meta.get("creationTimestamp")),
                    "StartedTimestamp": _unix(node.get("startedAt")),
                    "FinishedTimestamp": _unix(node.get("finishedAt")),
                    "Name": node.get("displayName", ""),
                    "State": PHASE_TO_V2.get(str(node.get("phase", "")).upper(),
                                             "RUNTIME_STATE_UNSPECIFIED"),
                    "ChildrenPods": list(node.get("children") or [])})
    return out


def store_tasks(tasks: list[dict[str, Any]], existing: dict[str, dict[str, Any]],
                now: int) -> list[dict[str, Any]]:
    """task_store.go CreateOrUpdateTasks: keep the UUID and history of the row with the same
    PodName (patchWithExistingTasks), else a new UUID; append a history entry on change."""
    for t in tasks:
        old = existing.get(t["PodName"])
        t["UUID"] = old["UUID"] if old else str(uuid.uuid4())
        history = list(old["StateHistory"]) if old else []
        if not history or history[-1]["State"] != t["State"]:
            history.append({"UpdateTimeInSec": now, "State": t["State"]})
        t["StateHistory"] = history
        existing[t["PodName"]] = t
    return tasks


def cache_row(run_id: str, pipeline: str, namespace: str, execution_id: int,
              fingerprint: str, started: int, finished: int) -> dict[str, Any]:
    """The v1 task the launcher records for an executed, cache-enabled task
    (v2/component/launcher_v2.go, Execute; cacheutils/cache.go CreateExecutionCache ->
    task_server.go CreateTaskV1 -> task_store.go CreateTask): no name, no pod, no state; it
    joins the run's task_details by RunUUID (run_store.go addMetricsResourceReferencesAndTasks)."""
    return {"UUID": str(uuid.uuid4()), "Namespace": namespace,
            "PipelineName": f"pipeline/{pipeline}", "RunID": run_id, "PodName": "",
            "MLMDExecutionID": str(execution_id), "CreatedTimestamp": started,
            "StartedTimestamp": started, "FinishedTimestamp": finished,
            "Fingerprint": fingerprint, "Name": "", "State": "RUNTIME_STATE_UNSPECIFIED",
            "StateHistory": [], "ChildrenPods": []}


def api_task_detail(t: dict[str, Any]) -> dict[str, Any]:
    """toApiPipelineTaskDetail, as the gateway marshals it (proto names, zero values left out)."""
    try:
        exec_id = int(t.get("MLMDExecutionID") or "")
    except ValueError:
        exec_id = 0
    out: dict[str, Any] = {"run_id": t["RunID"], "task_id": t["UUID"]}
    if t.get("Name"):
        out["display_name"] = t["Name"]
    out["create_time"] = _stamp(t["CreatedTimestamp"])
    out["start_time"] = _stamp(t["StartedTimestamp"])
    out["end_time"] = _stamp(t["FinishedTimestamp"])
    if t["State"] != "RUNTIME_STATE_UNSPECIFIED":
        out["state"] = t["State"]
    if exec_id:
        out["execution_id"] = str(exec_id)
    if t.get("StateHistory"):
        out["state_history"] = [{"update_time": _stamp(h["UpdateTimeInSec"]),
                                 "state": h["State"]} for h in t["StateHistory"]]
    if t.get("ChildrenPods"):
        out["child_tasks"] = [{"pod_name": c} for c in t["ChildrenPods"]]
    return out
