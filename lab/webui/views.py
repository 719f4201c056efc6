"""The JSON the UI's pages draw, read from the backend API the CLI uses (`lab/backends/base.py`:
`list`, `get`), so the UI shows what `kflab get` shows, on either backend."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from lab.kube.katib import objective_column

LISTED = {"jobs": ("PyTorchJob", "TFJob", "TrainJob"), "inferenceservices": ("InferenceService",),
          "notebooks": ("Notebook",), "experiments": ("Experiment",)}


class NotFound(Exception):
    pass


def answer(backend: Any, api: Any, path: str, root: Path | None = None) -> Any:
    """`runs`, `runs/NAME`, `experiments`, `experiments/NAME`, `jobs`, `inferenceservices`,
    `notebooks`, `labs`, `labs/ID` (the guided labs' progress in the state folder `root`).
    A name the backend refuses (`..%2f`, a NUL, 5000 characters) is no such object."""
    from lab.errors import InputError

    try:
        return _answer(backend, api, path, root)
    except InputError as exc:
        raise NotFound(exc.problem) from None


def _answer(backend: Any, api: Any, path: str, root: Path | None = None) -> Any:
    parts = [p for p in path.split("/") if p]
    if parts and parts[0] == "labs" and len(parts) <= 2 and root is not None:
        from lab.webui import progress

        try:
            return progress.page(root, parts[1]) if len(parts) == 2 else progress.listing(root)
        except progress.Unknown as exc:
            raise NotFound(str(exc)) from None
    if parts == ["runs"]:
        return [_run_row(o) for o in _newest(_listed(backend, "PipelineRun"))]
    if len(parts) == 2 and parts[0] == "runs":
        obj = backend.get("PipelineRun", parts[1])
        if obj is None and api is not None:  # a KFP run id (kfp.Client's #/runs/details/ID)
            name = api.run_name(parts[1])
            obj = backend.get("PipelineRun", name) if name else None
        if obj is None:
            raise NotFound(f"no pipeline run '{parts[1]}'")
        return _run_page(obj, api)
    if len(parts) == 3 and parts[0] == "kfp" and api is not None:
        return _kfp_page(api, parts[1], parts[2])
    if len(parts) == 5 and parts[0] == "runs" and parts[2] == "artifacts":
        return artifact_page(backend, parts[1], parts[3], parts[4])
    if len(parts) == 4 and parts[0] == "runs" and parts[2] == "logs":
        return {"lines": _log_lines(backend, parts[1], parts[3])}
    if len(parts) == 2 and parts[0] == "experiments":
        return _experiment_page(backend, parts[1])
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


MAX_LOG_LINES = 2000
MAX_ARTIFACT = 1024 * 1024
MAX_MARKDOWN = 50 * 1000 * 8  # KFP's MarkdownViewer MAX_MARKDOWN_STR_LENGTH (characters)
SHOWN = ("system.HTML", "system.Markdown")  # the artifact types whose file the page shows

# How the KFP UI renders each output artifact type (kubeflow/pipelines 2.16.0 frontend,
# src/components/viewers/MetricsVisualizations.tsx: ConfidenceMetricsSection,
# ConfusionMatrixSection, ScalarMetricsSection, getHtmlViewerConfig,
# getMarkdownViewerConfig; HTMLViewer.tsx, MarkdownViewer.tsx, ROCCurve.tsx), and what kflab
# does the same way (docs/ui.md):
# - system.ClassificationMetrics: "ROC Curve: NAME" from metadata.confidenceMetrics, each
#   point x = falsePositiveRate, y = recall, labelled with confidenceThreshold, both axes 0..1
#   with the dashed diagonal; "Confusion Matrix: NAME" from metadata.confusionMatrix, rows
#   the true label, columns the predicted one. Malformed data is not drawn: an error names
#   the artifact and the field, as KFP's banner does (validateConfidenceMetrics,
#   validateConfusionMatrix).
# - system.Metrics: "Scalar Metrics: NAME", a name/value table of every metadata entry but
#   display_name, each value as JSON.
# - system.HTML: the file in an iframe sandboxed with allow-scripts only (scripts run, in an
#   opaque origin: no cookie, no call to the UI); here the page also gets no network.
# - system.Markdown: rendered with raw HTML not parsed (markdown-to-jsx with
#   disableParsingRawHTML), cut at MAX_MARKDOWN characters with a warning.


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _roc(name: str, raw: Any) -> dict[str, Any]:
    """ROC points sorted by false positive rate (uPlot needs x ascending), or an error."""
    points = raw.get("list") if isinstance(raw, dict) else raw  # MLMD keeps it as {list: []}
    keys = ("confidenceThreshold", "falsePositiveRate", "recall")
    if not isinstance(points, list) or not all(
            isinstance(p, dict) and all(_numeric(p.get(k)) for k in keys) for p in points):
        return {"error": f"Error in {name} artifact's confidenceMetrics data format: each "
                         "point needs numbers confidenceThreshold, falsePositiveRate and "
                         "recall (log_roc_curve(fpr, tpr, threshold) writes them)"}
    pts = sorted(({"threshold": p["confidenceThreshold"], "fpr": p["falsePositiveRate"],
                   "tpr": p["recall"]} for p in points), key=lambda p: (p["fpr"], p["tpr"]))
    return {"points": pts}


def _confusion(name: str, raw: Any) -> dict[str, Any]:
    cm = raw.get("struct", raw) if isinstance(raw, dict) else raw  # MLMD: {struct: {...}}
    specs = cm.get("annotationSpecs") if isinstance(cm, dict) else None
    rows = cm.get("rows") if isinstance(cm, dict) else None
    ok = isinstance(specs, list) and isinstance(rows, list) and len(specs) == len(rows) \
        and all(isinstance(a, dict) and isinstance(a.get("displayName"), str) for a in specs) \
        and all(isinstance(r, dict) and isinstance(r.get("row"), list)
                and len(r["row"]) == len(rows) and all(_numeric(v) for v in r["row"])
                for r in rows)
    if not ok:
        return {"error": f"Error in {name} artifact's confusionMatrix data format: one "
                         "annotationSpec per class and a square matrix of numbers "
                         "(log_confusion_matrix(categories, matrix) writes them)"}
    return {"labels": [a["displayName"] for a in specs], "rows": [r["row"] for r in rows]}


def _artifact(name: str, art: Any) -> dict[str, Any]:
    """What the run page draws of an output artifact, by type, as the KFP UI draws it."""
    art = art if isinstance(art, dict) else {}
    meta = art.get("metadata") if isinstance(art.get("metadata"), dict) else {}
    kind = art.get("type", "")
    out: dict[str, Any] = {"name": name, "type": kind,
                           "shown": kind in SHOWN and bool(art.get("exists"))}
    if kind == "system.ClassificationMetrics" or "confusionMatrix" in meta:
        if "confidenceMetrics" in meta:
            out["roc"] = _roc(name, meta["confidenceMetrics"])
        if "confusionMatrix" in meta:
            out["confusion"] = _confusion(name, meta["confusionMatrix"])
    elif kind == "system.Metrics":
        out["scalars"] = [[k, json.dumps(v)] for k, v in meta.items() if k != "display_name"]
    return out


class Page:
    """An artifact's file, served to a sandboxed frame (never run as the UI's own page)."""

    def __init__(self, body: bytes, ctype: str, scripts: bool = False) -> None:
        self.body, self.ctype, self.scripts = body, ctype, scripts


MARKDOWN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font: 15px/1.5 system-ui, sans-serif; color: #1b1b1b; margin: 8px 12px; }}
h1, h2 {{ border-bottom: 1px solid #eee; padding-bottom: .3em; }}
h1, h2, h3, h4, h5, h6 {{ font-size: initial; font-weight: 700; margin: 1em 0 16px; }}
code, pre {{ background: #f8f8f8; border-radius: 5px; }}
pre {{ border: 1px solid #eee; margin: 7px 0; padding: 7px; overflow: auto; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 2px 6px; }}
.warning {{ background: #fff4ce; border: 1px solid #e0b000; padding: 6px; }}
</style></head><body>
{warning}{body}</body></html>
"""


def render_markdown(text: str, title: str) -> bytes:
    """A Markdown artifact as the KFP UI shows it: raw HTML left as text, at most
    MAX_MARKDOWN characters. markdown-it-py (a kflab dependency, with rich) renders it in the
    markdown-it "js-default" preset: CommonMark plus tables and strikethrough, html off, and
    its link check drops javascript:, vbscript: and data: (but image) URLs."""
    from html import escape

    from markdown_it import MarkdownIt

    warning = ""
    if len(text) > MAX_MARKDOWN:
        text = text[:MAX_MARKDOWN]
        warning = '<p class="warning">This markdown is too large to render completely.</p>\n'
    body = MarkdownIt("js-default").render(text)
    return MARKDOWN_PAGE.format(title=escape(title), warning=warning, body=body).encode()


def artifact_page(backend: Any, run: str, task: str, output: str) -> Page:
    """An HTML artifact's file, or a Markdown artifact rendered (a file of at most 1 MiB
    read), only from inside the state folder's pipeline root: a record edited to point
    elsewhere is refused."""
    from lab import state

    obj = backend.get("PipelineRun", run)
    found = next((t for t in ((obj or {}).get("status") or {}).get("run_details", {})
                  .get("task_details", []) if t.get("display_name") == task), None)
    art = ((found or {}).get("outputs") or {}).get("artifacts", {}).get(output)
    if not isinstance(art, dict) or art.get("type") not in SHOWN or not art.get("path"):
        raise NotFound(f"no HTML or Markdown artifact '{output}' of task '{task}'")
    root = Path(getattr(backend, "root", "")) / "pipeline-root"
    try:
        path = state.confine(root, Path(art["path"]))
        with open(path, "rb") as fh:
            body = fh.read(MAX_ARTIFACT + 1)
    except (state.StateError, OSError):
        raise NotFound(f"artifact '{output}' of task '{task}' is not readable here") from None
    if len(body) > MAX_ARTIFACT:
        body = body[:MAX_ARTIFACT] + b"\n[cut at 1 MiB]"
    if art["type"] == "system.HTML":
        return Page(body, "text/html; charset=utf-8", scripts=True)
    text = body.decode("utf-8", errors="replace")
    return Page(render_markdown(text, f"{task} / {output}"), "text/html; charset=utf-8")


def _log_lines(backend: Any, run: str, task: str) -> list[str]:
    """The last lines of one task's log (`kflab logs run/NAME --replica TASK`)."""
    from collections import deque

    from lab.errors import LabError

    if backend.get("PipelineRun", run) is None:
        raise NotFound(f"no pipeline run '{run}'")
    try:
        return [line.rstrip("\n") for line in
                deque(backend.logs("PipelineRun", run, replica=task), maxlen=MAX_LOG_LINES)]
    except LabError as exc:
        raise NotFound(str(exc)) from None


def _listed(backend: Any, kind: str) -> list[dict[str, Any]]:
    try:
        return backend.list(kind)
    except Exception:  # a kind this backend cannot list (no CRD on the cluster): no rows
        return []


def _newest(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(objs, key=lambda o: o["metadata"].get("creationTimestamp") or "",
                  reverse=True)


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    except ValueError:
        return None
    return round((b - a).total_seconds(), 2)


def _kfp_page(api: Any, what: str, oid: str) -> dict[str, Any]:
    """A KFP experiment with its runs, or a pipeline with its versions: what the pages
    kfp.Client links to (#/experiments/details/ID, #/pipelines/details/ID) show, read from
    the local KFP API."""
    from lab.webui.kfp_store import ApiError

    try:
        if what == "experiments":
            exp = api.experiments.get(eid=oid)
            runs = [{"name": api.run_name(r["run_id"]), "display_name": r.get("display_name"),
                     "state": r.get("state"), "created_at": r.get("created_at"),
                     "storage_state": r.get("storage_state")}
                    for r in api.runs.all_views() if r.get("experiment_id") == oid]
            return {"experiment": exp, "runs": runs}
        if what == "pipelines":
            versions = sorted(api.pipelines.versions_of(oid), key=lambda v: v["created_at"],
                              reverse=True)
            return {"pipeline": api.pipelines.get(pid=oid),
                    "versions": [{k: v.get(k) for k in ("pipeline_version_id", "display_name",
                                                         "description", "created_at")}
                                 for v in versions]}
    except ApiError as exc:
        raise NotFound(exc.external) from None
    raise NotFound(f"no KFP {what} view")


def _run_row(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    tasks = (status.get("run_details") or {}).get("task_details") or []
    return {"name": obj["metadata"]["name"], "state": status.get("state", "PENDING"),
            "pipeline": status.get("pipeline_name", ""), "tasks": len(tasks),
            "created_at": status.get("created_at") or obj["metadata"].get("creationTimestamp"),
            "duration_s": _seconds(status.get("created_at"), status.get("finished_at"))}


def _run_page(obj: dict[str, Any], api: Any) -> dict[str, Any]:
    status = obj.get("status") or {}
    tasks = []
    for t in (status.get("run_details") or {}).get("task_details") or []:
        outputs = t.get("outputs") or {}
        tasks.append({"name": t.get("display_name"), "state": t.get("state"),
                      "cached": bool(t.get("cached")),
                      "duration_s": _seconds(t.get("start_time"), t.get("end_time")),
                      "parameters": outputs.get("parameters") or {},
                      "metrics": outputs.get("metrics") or {},
                      "artifacts": [_artifact(n, a) for n, a in
                                    sorted((outputs.get("artifacts") or {}).items())]})
    return {**_run_row(obj), "error": (status.get("error") or {}).get("message"),
            "arguments": (obj.get("spec") or {}).get("arguments") or {},
            "tasks": tasks, "edges": _edges(obj, api, [t["name"] for t in tasks])}


def _edges(obj: dict[str, Any], api: Any, names: list[str]) -> list[list[str]]:
    """The DAG's edges [upstream, task]: recorded by the run (`status.dag`), else read from
    the pipeline spec a KFP API run was created with."""
    dag = (obj.get("status") or {}).get("dag")
    if not isinstance(dag, dict):
        dag = api.dag_of(obj["metadata"]["name"]) if api is not None else None
    out = []
    for task, deps in (dag or {}).items():
        out += [[str(d), str(task)] for d in deps or [] if isinstance(deps, list)]
    return out


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
        row["replicas"] = {k: v for k, v in (status.get("replicaStatuses") or {}).items()}
    if kind == "TrainJob":  # Trainer v2 writes counts per replicated Job (jobsStatus)
        row["replicas"] = {j.get("name", ""): {k: v for k, v in j.items()
                                               if k != "name" and v}
                           for j in status.get("jobsStatus") or []}
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


def _replica_page(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A Training Operator job's replicas, with their type's counts (replicaStatuses)."""
    specs = (obj.get("spec") or {}).get(REPLICA_SPECS[kind]) or {}
    statuses = (obj.get("status") or {}).get("replicaStatuses") or {}
    replicas = []
    for rtype, spec in specs.items():
        count = int((spec or {}).get("replicas", 1) or 0)
        st = statuses.get(rtype) or {}
        replicas += [{"name": f"{rtype.lower()}-{i}", "type": rtype,
                      "active": st.get("active", 0), "succeeded": st.get("succeeded", 0),
                      "failed": st.get("failed", 0)} for i in range(count)]
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
    objective = ((exp.get("spec") or {}).get("objective") or {})
    rows = []
    for t in trials:
        assignments = {a.get("name"): a.get("value") for a in
                       (t.get("spec") or {}).get("parameterAssignments") or []}
        value = objective_column(t)
        rows.append({**_row("Trial", t), "parameters": assignments,
                     "objective": float(value) if _number(value) else None})
    return {**_row("Experiment", exp), "metric": objective.get("objectiveMetricName", ""),
            "goal": objective.get("type", ""), "trials": rows}


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
