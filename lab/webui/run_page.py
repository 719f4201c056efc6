"""The JSON of the UI's pipeline run pages: a run (its parameters, error, graph and tasks), one
task's side panel (inputs, outputs, artifacts, log) and an artifact's file; read from the
PipelineRun records the CLI reads (`kflab get runs`, `kflab logs`), on either backend.

A task is named by its path in the run (lab.backends.shapes.task_path: its display name under
the DAG tasks it runs in), so two tasks of one name in two sub-DAGs stay apart.
"""

from __future__ import annotations

import json
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any

from lab.backends import shapes

MAX_LOG_LINES = 2000
MAX_ARTIFACT = 1024 * 1024
MAX_DOWNLOAD = 64 * 1024 * 1024  # an artifact file offered for download
MAX_INPUT_FILE = 4 * 1024 * 1024  # a task's executor_input.json
MAX_MARKDOWN = 50 * 1000 * 8  # KFP's MarkdownViewer MAX_MARKDOWN_STR_LENGTH (characters)
SHOWN = ("system.HTML", "system.Markdown")  # the artifact types whose file the page shows


class NotFound(Exception):
    pass


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
    """What the run page draws of an output artifact, by type, as the KFP UI draws it, and
    where it is: its URI and, for a file in the state folder, a download."""
    art = art if isinstance(art, dict) else {}
    meta = art.get("metadata") if isinstance(art.get("metadata"), dict) else {}
    kind = str(art.get("type", ""))
    out: dict[str, Any] = {"name": name, "type": kind, "uri": str(art.get("uri") or ""),
                           "shown": kind in SHOWN and bool(art.get("exists"))}
    path = art.get("path")
    if art.get("exists") and isinstance(path, str) and path:
        out["download"] = Path(path).name or name
    if kind == "system.ClassificationMetrics" or "confusionMatrix" in meta:
        if "confidenceMetrics" in meta:
            out["roc"] = _roc(name, meta["confidenceMetrics"])
        if "confusionMatrix" in meta:
            out["confusion"] = _confusion(name, meta["confusionMatrix"])
    elif kind == "system.Metrics":
        out["scalars"] = [[k, json.dumps(v)] for k, v in meta.items() if k != "display_name"]
    return out


def seconds(start: Any, end: Any) -> float | None:
    if not isinstance(start, str) or not isinstance(end, str) or not start or not end:
        return None
    try:
        a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    except ValueError:
        return None
    return round((b - a).total_seconds(), 3)


def run_row(obj: dict[str, Any]) -> dict[str, Any]:
    """A run in the runs list: its state, pipeline, task count and duration (to the
    millisecond where the record has the run's own times)."""
    status = obj.get("status") or {}
    tasks = shapes.tasks(obj)
    took = seconds(status.get("start_time"), status.get("end_time"))
    if took is None:
        took = seconds(status.get("created_at"), status.get("finished_at"))
    return {"name": obj["metadata"]["name"], "run_id": str(status.get("run_id") or ""),
            "state": status.get("state", "PENDING"),
            "pipeline": status.get("pipeline_name", ""), "tasks": len(tasks),
            "created_at": status.get("created_at") or obj["metadata"].get("creationTimestamp"),
            "finished_at": status.get("finished_at"), "duration_s": took}


def find(backend: Any, api: Any, key: str) -> dict[str, Any]:
    """The PipelineRun a page names: by its name, or by a KFP run id (the links kfp.Client
    prints, `#/runs/details/ID`): a run of the local KFP API, or a run's own run_id."""
    obj = backend.get("PipelineRun", key)
    if obj is not None:
        return obj
    name = getattr(api, "run_name", None)
    found = name(key) if callable(name) else None
    if found:
        obj = backend.get("PipelineRun", found)
        if obj is not None:
            return obj
    for obj in _listed(backend):
        if str((obj.get("status") or {}).get("run_id") or "") == key:
            return obj
    raise NotFound(f"no pipeline run '{key}'")


def _listed(backend: Any) -> list[dict[str, Any]]:
    try:
        return backend.list("PipelineRun")
    except Exception:  # no PipelineRuns on this backend (no CRD, no access): none
        return []


def run_page(backend: Any, api: Any, key: str) -> dict[str, Any]:
    obj = find(backend, api, key)
    status = obj.get("status") or {}
    tasks = [_task(t) for t in shapes.tasks(obj)]
    graph = status.get("graph")
    error = status.get("error")
    return {**run_row(obj), "error": error.get("message") if isinstance(error, dict) else
            (str(error) if error else None),
            "arguments": (obj.get("spec") or {}).get("arguments") or {},
            "tasks": tasks, "graph": graph if isinstance(graph, dict) else None,
            "edges": _edges(obj, api), "failures": _failures(backend, obj)}


MAX_FAILURES, FAILURE_LINES = 3, 8


def _failures(backend: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The tasks that failed, each with the end of its log (where a component's exception
    is), for the top of a failed run's page: the run's own error only names them."""
    if (obj.get("status") or {}).get("state") != "FAILED":
        return []
    logged = _logged(obj)
    out = []
    for t in shapes.tasks(obj):
        path = shapes.task_path(t)
        if t.get("state") != "FAILED" or path not in logged:
            continue
        try:
            lines = [line for line in _log_lines(backend, obj, path) if line.strip()]
        except NotFound:
            lines = []
        out.append({"key": path, "name": str(t.get("display_name")),
                    "tail": lines[-FAILURE_LINES:]})
        if len(out) == MAX_FAILURES:
            break
    return out


def _task(t: dict[str, Any]) -> dict[str, Any]:
    outputs = t.get("outputs") if isinstance(t.get("outputs"), dict) else {}
    arts = outputs.get("artifacts") if isinstance(outputs.get("artifacts"), dict) else {}
    out = {"key": shapes.task_path(t), "name": str(t.get("display_name")),
           "parent": t.get("parent") if isinstance(t.get("parent"), str) else None,
           "state": t.get("state"), "cached": bool(t.get("cached")),
           "start_time": t.get("start_time"), "end_time": t.get("end_time"),
           "duration_s": seconds(t.get("start_time"), t.get("end_time")),
           "parameters": outputs.get("parameters") or {},
           "metrics": outputs.get("metrics") or {},
           "artifacts": [_artifact(n, a) for n, a in sorted(arts.items())]}
    if isinstance(t.get("iterations"), int):
        out["iterations"] = t["iterations"]
    return out


def _edges(obj: dict[str, Any], api: Any) -> list[list[str]]:
    """The root DAG's edges [upstream, task] of a run recorded before runs kept their whole
    graph: recorded by the run (`status.dag`), else read from the pipeline spec a KFP API
    run was created with."""
    dag = (obj.get("status") or {}).get("dag")
    if not isinstance(dag, dict) and api is not None and hasattr(api, "dag_of"):
        dag = api.dag_of(obj["metadata"]["name"])
    out = []
    for task, deps in (dag or {}).items():
        out += [[str(d), str(task)] for d in deps or [] if isinstance(deps, list)]
    return out


def _task_record(obj: dict[str, Any], key: str) -> dict[str, Any]:
    try:
        path = shapes.find_task_path(obj, key)
    except ValueError as several:
        raise NotFound(f"more than one task '{key}': name one by its path ({several})"
                       ) from None
    found = next((t for t in shapes.tasks(obj) if shapes.task_path(t) == path), None)
    if found is None:
        raise NotFound(f"pipeline run '{obj['metadata']['name']}' has no task '{key}'")
    return found


def task_panel(backend: Any, api: Any, key: str, task: str) -> dict[str, Any]:
    """One task, as the KFP UI's side panel shows it: its inputs (parameters, and artifacts
    with the task that wrote each), outputs, artifacts and the last lines of its log."""
    obj = find(backend, api, key)
    record = _task_record(obj, task)
    out = _task(record)
    out["run"] = obj["metadata"]["name"]
    out["inputs"] = _inputs(backend, obj, out["key"])
    if record.get("error"):
        err = record["error"]
        out["error"] = str(err.get("message", err) if isinstance(err, dict) else err)
    out["log"] = _log_lines(backend, obj, out["key"]) if out["key"] in _logged(obj) else None
    return out


def _logged(obj: dict[str, Any]) -> set[str]:
    """Tasks that ran a process: a DAG task (a sub-pipeline, a condition, a loop), a task
    skipped or reused from the cache has no log of its own."""
    tasks = shapes.tasks(obj)
    dags = {t.get("parent") for t in tasks}
    return {p for t in tasks if (p := shapes.task_path(t)) not in dags and t.get("start_time")
            and t.get("state") != "SKIPPED" and "iterations" not in t}


def _inputs(backend: Any, obj: dict[str, Any], path: str) -> dict[str, Any]:
    """The task's inputs from the executor input the engine wrote for it (its folder under
    the run's pipeline root, only inside the state folder's pipeline-root/): parameter values,
    and each input artifact's URI with the task that wrote it."""
    from lab import state

    root = Path(getattr(backend, "root", "") or "") / "pipeline-root"
    run_root = (obj.get("status") or {}).get("pipeline_root")
    if not getattr(backend, "root", None) or not isinstance(run_root, str):
        return {"available": False}
    try:
        file = state.confine(root, Path(run_root) / path / "executor_input.json")
        with open(file, "rb") as fh:
            raw = fh.read(MAX_INPUT_FILE + 1)
        data = json.loads(raw) if len(raw) <= MAX_INPUT_FILE else None
    except (state.StateError, OSError, ValueError, RecursionError):
        data = None
    inputs = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(inputs, dict):
        return {"available": False}
    producers = {}
    for t in shapes.tasks(obj):
        arts = ((t.get("outputs") or {}).get("artifacts") or {}) if isinstance(
            t.get("outputs"), dict) else {}
        for name, art in arts.items() if isinstance(arts, dict) else []:
            if isinstance(art, dict) and art.get("uri"):
                producers[str(art["uri"])] = {"task": shapes.task_path(t), "output": name}
    artifacts = []
    for name, entry in sorted((inputs.get("artifacts") or {}).items()):
        for a in (entry or {}).get("artifacts") or [] if isinstance(entry, dict) else []:
            if isinstance(a, dict):
                uri = str(a.get("uri") or "")
                artifacts.append({"name": name, "uri": uri,
                                  "type": str((a.get("type") or {}).get("schemaTitle", "")),
                                  "from": producers.get(uri)})
    params = inputs.get("parameterValues")
    return {"available": True, "parameters": params if isinstance(params, dict) else {},
            "artifacts": artifacts}


def _log_lines(backend: Any, obj: dict[str, Any], path: str) -> list[str]:
    from lab.errors import LabError

    try:
        return [line.rstrip("\n") for line in deque(
            backend.logs("PipelineRun", obj["metadata"]["name"], replica=path),
            maxlen=MAX_LOG_LINES)]
    except LabError as exc:
        raise NotFound(str(exc).splitlines()[0]) from None


def log_lines(backend: Any, api: Any, key: str, task: str) -> list[str]:
    """The last lines of one task's log (`kflab logs run/NAME --task TASK`)."""
    obj = find(backend, api, key)
    return _log_lines(backend, obj, shapes.task_path(_task_record(obj, task)))


class Page:
    """An artifact's file, served to a sandboxed frame (never run as the UI's own page), or
    as a download (`download`: the file name)."""

    def __init__(self, body: bytes, ctype: str, scripts: bool = False,
                 download: str | None = None) -> None:
        self.body, self.ctype, self.scripts, self.download = body, ctype, scripts, download


MARKDOWN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font: 15px/1.5 system-ui, sans-serif; color: #1b1b1b; background: #fff;
        margin: 8px 12px; }}
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


def artifact_page(backend: Any, api: Any, run: str, task: str, output: str,
                  download: bool = False) -> Page:
    """An HTML artifact's file, a Markdown artifact rendered (a file of at most 1 MiB read),
    or any artifact's file as a download (at most MAX_DOWNLOAD), only from inside the state
    folder's pipeline root: a record edited to point elsewhere is refused."""
    from lab import state

    obj = find(backend, api, run)
    record = _task_record(obj, task)
    art = ((record.get("outputs") or {}).get("artifacts") or {}).get(output) \
        if isinstance(record.get("outputs"), dict) else None
    if not isinstance(art, dict) or not art.get("path") or \
            (not download and art.get("type") not in SHOWN):
        raise NotFound(f"no {'' if download else 'HTML or Markdown '}artifact '{output}' "
                       f"of task '{task}'")
    root = Path(getattr(backend, "root", "") or "") / "pipeline-root"
    limit = MAX_DOWNLOAD if download else MAX_ARTIFACT
    try:
        path = state.confine(root, Path(art["path"]))
        if download and path.is_dir():
            raise NotFound(f"artifact '{output}' of task '{task}' is a folder: its files are "
                           f"in {path}")
        with open(path, "rb") as fh:
            body = fh.read(limit + 1)
    except (state.StateError, OSError):
        raise NotFound(f"artifact '{output}' of task '{task}' is not readable here") from None
    if download:
        if len(body) > limit:
            raise NotFound(f"artifact '{output}' is over {limit // 2**20} MiB: it is at "
                           f"{path}")
        return Page(body, "application/octet-stream", download=path.name or output)
    if len(body) > MAX_ARTIFACT:
        body = body[:MAX_ARTIFACT] + b"\n[cut at 1 MiB]"
    if art["type"] == "system.HTML":
        return Page(body, "text/html; charset=utf-8", scripts=True)
    text = body.decode("utf-8", errors="replace")
    return Page(render_markdown(text, f"{task} / {output}"), "text/html; charset=utf-8")
