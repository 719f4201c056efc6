"""Has a resource failed, and why: read from the upstream status shape alone, so `kflab check`,
`kflab get`, `kflab describe` and `kflab pipeline run` say the same on both backends.

A failed resource is reported as failed with its reason, never as "not ready yet": a Katib
Experiment, Trial or PyTorchJob with `Failed=True`, a pipeline run FAILED or CANCELED, an
InferenceService whose model failed to load (KServe's `modelStatus.lastFailureInfo`).
Where the controller's reason is terse ("Inner task failed"), the failing part's own error
(the last lines of its log) is added: a pipeline task's, a training replica's, a model
server's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lab.backends import shapes

FAILED_RUN_STATES = ("FAILED", "CANCELED")
# A Python exception line (`NameError: name 'pd' is not defined`), a shell's, a process's.
_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b|"
                        r"error:|Error:|ERROR\b|Killed\b)")
_NOISE = re.compile(r"^\s*(\^+|~+|-{10,})\s*$")  # caret markers and rules carry no text


@dataclass
class Failure:
    """What failed: `reason` in one line, `part` (a task, a replica), its log's last lines,
    and the command that shows the whole log."""

    reason: str
    part: str | None = None
    tail: list[str] = field(default_factory=list)
    logs_command: str | None = None

    def lines(self) -> list[str]:
        """The failure as the CLI prints it, one item per line."""
        out = [self.reason]
        if self.tail:
            out.append(f"last lines of {self.part or 'its log'}:")
            out.extend(f"  {line}" for line in self.tail)
        if self.logs_command:
            out.append(f"full log: {self.logs_command}")
        return out

    def one_line(self) -> str:
        error = next((t.strip() for t in reversed(self.tail) if _EXCEPTION.match(t)), None)
        text = self.reason + (f" -- {error}" if error and error not in self.reason else "")
        return text + (f" (see `{self.logs_command}`)" if self.logs_command else "")


def _condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)


def reason(obj: dict[str, Any] | None) -> str | None:
    """Why the resource failed, from its status only; None while it has not failed."""
    status = (obj or {}).get("status") or {}
    if not isinstance(status, dict):
        return None
    if status.get("state") in FAILED_RUN_STATES:  # a pipeline run (KFP's RuntimeState)
        message = shapes.error_message(obj)
        failed = [t.get("display_name") for t in shapes.tasks(obj)
                  if t.get("state") in FAILED_RUN_STATES]
        if status["state"] == "CANCELED":  # stopped (a signal, kflab delete): say why
            return "run CANCELED" + (f": {message}" if message else "")
        if failed:  # KFP's own message then only repeats "Inner task failed: 'T'"
            return f"run {status['state']}: task {', '.join(map(str, failed))} failed"
        return f"run {status['state']}" + (f": {message}" if message else "")
    cond = _condition(status, "Failed")
    if cond is not None and cond.get("status") == "True":  # Katib, Training Operator
        detail = cond.get("message") or cond.get("reason") or ""
        return "Failed" + (f": {detail}" if detail else "")
    term = (status.get("containerState") or {}).get("terminated")
    if isinstance(term, dict):  # a Notebook: the controller mirrors its server's container
        detail = term.get("message") or term.get("reason") or ""
        return "server terminated" + (f": {detail}" if detail else "")
    info = (status.get("modelStatus") or {}).get("lastFailureInfo")
    ready = _condition(status, "Ready") or {}
    if isinstance(info, dict) and ready.get("status") != "True":  # KServe
        return (f"not Ready: {info.get('reason', 'Failed')}: {info.get('message', '')}"
                .rstrip(": "))
    return None


def error_tail(lines: list[str], n: int = 3) -> list[str]:
    """The last `n` meaningful lines of a log: where a traceback ends, its last frames and
    the exception; blank lines and caret markers dropped."""
    kept = [line.rstrip() for line in lines if line.strip() and not _NOISE.match(line)]
    last_error = max((i for i, line in enumerate(kept) if _EXCEPTION.match(line)), default=None)
    end = len(kept) if last_error is None else last_error + 1
    return [line.strip() for line in kept[max(0, end - n):end]]


def _log_tail(backend: Any, kind: str, name: str, namespace: str,
              part: str | None) -> list[str]:
    from lab.errors import LabError

    try:
        return error_tail(list(backend.logs(kind, name, namespace, part)))
    except LabError:
        return []  # no log to show (a pod never started): the reason stands alone
    except Exception:  # the explanation must never hide the failure it explains
        return []


def explain(backend: Any, obj: dict[str, Any] | None) -> Failure | None:
    """The failure of `obj` with its failing part's log tail, or None when it has not failed."""
    why = reason(obj)
    if why is None or obj is None:
        return None
    from lab.kube.kinds import lookup

    kind = lookup(str(obj.get("kind", ""))).kind
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace") or "default")
    alias = {"PipelineRun": "run", "InferenceService": "isvc"}.get(kind, kind.lower())
    ns_flag = "" if namespace == "default" else f" -n {namespace}"
    if kind == shapes.PIPELINE_RUN:
        failed = [str(t.get("display_name")) for t in shapes.tasks(obj)
                  if t.get("state") == "FAILED"]
        if failed:
            command = f"kflab logs run {name} --task {failed[0]}{ns_flag}"
            tail = _log_tail(backend, kind, name, namespace, failed[0])
            if not tail:  # KFP named no pod for the task: the run's log ends with its error
                tail, command = (_log_tail(backend, kind, name, namespace, None),
                                 f"kflab logs run {name}{ns_flag}")
            return Failure(why, f"task {failed[0]}" if "--task" in command else None,
                           tail, command)
        return Failure(why, None, _log_tail(backend, kind, name, namespace, None),
                       f"kflab logs run {name}{ns_flag}")
    if kind in ("PyTorchJob", "TFJob", "TrainJob", "InferenceService", "Notebook", "Trial"):
        return Failure(why, None, _log_tail(backend, kind, name, namespace, None),
                       f"kflab logs {alias} {name}{ns_flag}")
    if kind == "Experiment" and (trial := _failed_trial(backend, obj, namespace)) is not None:
        tname, message = trial
        return Failure(f"{why}; trial {tname}: {message}", f"trial {tname}",
                       _log_tail(backend, "Trial", tname, namespace, None),
                       f"kflab logs trial {tname}{ns_flag}")
    return Failure(why, None, [], f"kflab describe {alias} {name}{ns_flag}")


# Katib's per-state trial lists (status_util.go updateTrialsSummary) whose trials tell why
# an Experiment failed: its own message only says a count was reached.
_FAILED_TRIAL_LISTS = ("failedTrialList", "metricsUnavailableTrialList")


def _failed_trial(backend: Any, obj: dict[str, Any], namespace: str) -> tuple[str, str] | None:
    """(name, last condition message) of the Experiment's first failed trial -- where
    "'Accuracy' never appeared in the output" is said -- or None."""
    status = obj.get("status") or {}
    for key in _FAILED_TRIAL_LISTS:
        for tname in (status.get(key) or [])[:1]:
            try:
                trial = backend.get("Trial", str(tname), namespace)
            except Exception:  # the explanation must never hide the failure it explains
                return None
            conds = ((trial or {}).get("status") or {}).get("conditions") or []
            if conds and conds[-1].get("message"):
                return str(tname), str(conds[-1]["message"])
    return None
