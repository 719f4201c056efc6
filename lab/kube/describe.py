"""`kflab describe`: an object in kubectl's human layout (Name, Namespace, Labels, ...,
Spec and Status with field names spelled out) ending with an Events-like history.

kflab's kinds have no Event objects of their own to show on the local backend, so the
history is read from the status itself, on both backends alike: each condition at its
lastTransitionTime, and for a pipeline run its creation, each task's start and end and its
finish. The section says so, so nobody mistakes it for the cluster's Events.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SKIP_META = ("name", "namespace", "labels", "annotations", "managedFields")


def title(key: str) -> str:
    """kubectl's spelling of a field name: `maxTrialCount` -> `Max Trial Count`; keys with
    dots or slashes (labels) and snake_case words as they are, capitalised."""
    if any(c in key for c in "./"):
        return key
    words = _WORD.findall(key.replace("_", " ")) if not key.isupper() else [key]
    return " ".join(w[:1].upper() + w[1:] for w in words) or key


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "<nil>" if value is None else str(value)


def _block(data: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(data, dict):
        width = max((len(title(str(k))) for k, v in data.items()
                     if not isinstance(v, dict | list) or not v), default=0)
        for key, value in data.items():
            name = title(str(key)) + ":"
            if isinstance(value, dict | list) and value:
                lines.append(pad + name)
                lines.extend(_block(value, indent + 2))
            else:
                shown = "" if isinstance(value, dict | list) else _scalar(value)
                lines.append(f"{pad}{name.ljust(width + 1)}  {shown}".rstrip())
    elif isinstance(data, list):
        if all(not isinstance(v, dict | list) for v in data):
            lines.extend(f"{pad}{_scalar(v)}" for v in data)
        else:
            for item in data:
                lines.extend(_block(item, indent))
    else:
        lines.append(pad + _scalar(data))
    return lines


def _pairs(mapping: Any) -> list[str]:
    if not isinstance(mapping, dict) or not mapping:
        return ["<none>"]
    return [f"{k}={v}" for k, v in sorted(mapping.items())]


def _age(stamp: Any) -> str:
    try:
        # RFC 3339, with or without fractional seconds (KFP's API writes them)
        then = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return "<unknown>"
    secs = max(0, int((datetime.now(UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def history(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(time, type Normal/Warning, reason, message), oldest first, from the status."""
    status = obj.get("status") or {}
    if not isinstance(status, dict):
        return []
    events = []
    for cond in status.get("conditions") or []:
        if not isinstance(cond, dict):
            continue
        when = cond.get("lastTransitionTime") or cond.get("lastUpdateTime") or ""
        ctype, value = str(cond.get("type", "")), str(cond.get("status", ""))
        bad = (ctype == "Failed" and value == "True") or (
            value == "False" and ctype in ("Ready", "Succeeded", "PredictorReady"))
        reason = cond.get("reason") or f"{ctype}={value}"
        message = cond.get("message") or f"{ctype} is {value}"
        events.append((str(when), "Warning" if bad else "Normal", str(reason), str(message)))
    if "state" in status:  # a pipeline run: KFP's run and task times
        if status.get("created_at"):
            events.append((str(status["created_at"]), "Normal", "RunCreated",
                           f"run {status.get('display_name', '')} created"))
        for task in (status.get("run_details") or {}).get("task_details") or []:
            name = task.get("display_name", "")
            if task.get("start_time"):
                events.append((str(task["start_time"]), "Normal", "TaskStarted",
                               f"task {name} started"))
            if task.get("end_time"):
                state = str(task.get("state", ""))
                came = task.get("cached_from") if isinstance(task.get("cached_from"),
                                                              dict) else {}
                why = "" if not task.get("cached") else (
                    f" (cached, from run {came['run']})" if came.get("run") else " (cached)")
                events.append((str(task["end_time"]),
                               "Warning" if state in ("FAILED", "CANCELED") else "Normal",
                               f"Task{state.title()}", f"task {name} {state}{why}"))
        if status.get("finished_at"):
            state = str(status.get("state", ""))
            msg = ((status.get("error") or {}).get("message") or f"run {state}")
            events.append((str(status["finished_at"]),
                           "Warning" if state in ("FAILED", "CANCELED") else "Normal",
                           f"Run{state.title()}", msg))
    return sorted(events, key=lambda e: e[0])


def render(obj: dict[str, Any], failure: list[str] | None = None) -> str:
    """The whole description; `failure` (lab.backends.failures lines) when it failed."""
    meta = obj.get("metadata") or {}
    out = [f"Name:         {meta.get('name', '')}",
           f"Namespace:    {meta.get('namespace', '')}"]
    for label, key in (("Labels:", "labels"), ("Annotations:", "annotations")):
        pairs = _pairs(meta.get(key))
        out.append(f"{label.ljust(14)}{pairs[0]}")
        out.extend(" " * 14 + p for p in pairs[1:])
    out += [f"API Version:  {obj.get('apiVersion', '')}", f"Kind:         {obj.get('kind', '')}"]
    rest = {k: v for k, v in meta.items() if k not in _SKIP_META}
    if rest:
        out.append("Metadata:")
        out.extend(_block(rest, 2))
    for section in ("spec", "status"):
        if obj.get(section):
            out.append(f"{title(section)}:")
            out.extend(_block(obj[section], 2))
    if obj.get("kind") == "PipelineRun":
        from lab.kube.timeline import render as timeline

        out.extend(timeline(obj))
    if failure:
        out.append("Failure:")
        out.extend(f"  {line}" for line in failure)
    events = history(obj)
    out.append("Events:  (from the status: conditions and their transition times)"
               if events else "Events:       <none>")
    if events:
        rows = [("Type", "Reason", "Age", "Message"), ("----", "------", "----", "-------")]
        rows += [(kind, reason, _age(when), message) for when, kind, reason, message in events]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            out.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
    return "\n".join(out)
