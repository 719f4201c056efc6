"""Checks library: typed, declarative, each with a timeout and a learner-facing message.

A check type declares its fields (validated by the loader, so a typo is reported with file,
line and field before anything runs) and an `evaluate` that returns whether it holds and
what it observed. Checks read only the upstream status shape, never backend internals.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jmespath
import jmespath.exceptions

from lab import limits
from lab.errors import InputError, LabError
from lab.kube.conditions import get_condition
from lab.kube.kinds import lookup
from lab.scenarios import prediction
from lab.scenarios.compare import OPS, compare
from lab.scenarios.context import Context
from lab.scenarios.model import Check
from lab.yamlio import load_json, read_bytes, read_text


@dataclass(frozen=True)
class Outcome:
    ok: bool
    observed: str
    # Set when the resource the check reads has failed (lab.backends.failures): the check
    # then stops waiting and the learner reads "failed: why", never "not yet".
    failed: str | None = None


@dataclass(frozen=True)
class Field:
    types: tuple[type, ...]
    required: bool = False
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class CheckType:
    fields: dict[str, Field]
    evaluate: Callable[[Context, dict[str, Any]], Outcome]
    validate: Callable[[dict[str, Any]], str | None] | None = None


STR, NUM, LIST, DICT = (str,), (int, float), (list,), (dict,)
ANY = (str, int, float, bool, list, dict, type(None))
RESOURCE = {"kind": Field(STR, True), "name": Field(STR), "namespace": Field(STR)}


def _fetch(ctx: Context, p: dict[str, Any]) -> tuple[Any, str | None]:
    """The resource (or {'items': [...]} when no name is given), or why it is missing."""
    kind = lookup(p["kind"])
    ns = p.get("namespace", "default")
    if "name" not in p:
        return {"items": ctx.backend.list(kind.kind, ns)}, None
    obj = ctx.backend.get(kind.kind, p["name"], ns)
    if obj is None:
        return None, f"{kind.kind} '{p['name']}' does not exist" + _others(ctx, kind.kind,
                                                                         p["name"], ns)
    return obj, None


def _others(ctx: Context, kind: str, name: str, ns: str) -> str:
    """What there is instead of a missing `name`: the near miss a typo made ('frist-run'
    for 'first-run'), else the names there are (a few), so a learner sees the difference."""
    import difflib

    try:
        names = sorted(str((o.get("metadata") or {}).get("name")) for o in
                       ctx.backend.list(kind, ns))
    except (LabError, OSError):
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    if close:
        return f" (there is '{close[0]}': the step asks for '{name}')"
    if names:
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        return f" (there is {', '.join(repr(n) for n in names[:4])}{more})"
    return ""


def _condition(ctx: Context, p: dict[str, Any]) -> Outcome:
    obj, missing = _fetch(ctx, p)
    if missing:
        return Outcome(False, missing)
    cond = get_condition(obj.get("status") or {}, p["condition"])
    want = str(p.get("status", "True"))
    if cond is None:
        failed = get_condition(obj.get("status") or {}, "Failed")
        if failed is not None and failed.get("status") == "True":  # say why it never will
            return Outcome(False, f"Failed ({failed.get('reason', '')}): "
                                  f"{failed.get('message', '')}".rstrip(": "))
        return Outcome(False, f"no {p['condition']} condition yet")
    ok = cond.get("status") == want
    return Outcome(ok, f"{p['condition']}={cond.get('status')} ({cond.get('reason', '')})")


def _field(ctx: Context, p: dict[str, Any]) -> Outcome:
    obj, missing = _fetch(ctx, p)
    if missing:
        return Outcome(False, missing)
    value = jmespath.search(p["query"], obj)
    op = p.get("op", "==")
    ok = compare(value, op, p.get("value"))
    observed = f"{p['query']} = {value!r}"
    if not ok and lookup(p["kind"]).kind == "PipelineRun":
        observed += _metric_misses(obj, p["query"])
    return Outcome(ok, observed)


_METRIC_REF = re.compile(r"outputs\.metrics\.([A-Za-z_][\w-]*)")


def _metric_misses(run: dict[str, Any], query: str) -> str:
    """For a query over the run's task metrics: the tasks that logged metrics but not the
    one named, and what they logged instead ("train-svm logged acc, not accuracy")."""
    wanted = set(_METRIC_REF.findall(query))
    if len(wanted) != 1:
        return ""
    (name,) = wanted
    tasks = ((run.get("status") or {}).get("run_details") or {}).get("task_details") or []
    chosen = _selected_tasks(run, query, name)
    misses = []
    for task in tasks if isinstance(tasks, list) else []:
        metrics = ((task or {}).get("outputs") or {}).get("metrics")
        if chosen is not None and (task or {}).get("display_name") not in chosen:
            continue  # the query reads another task's metrics
        if isinstance(metrics, dict) and metrics and name not in metrics:
            misses.append(f"{task.get('display_name')} logged "
                          f"{', '.join(map(str, list(metrics)[:3]))}")
    return f"; not '{name}': " + "; ".join(misses[:5]) if misses else ""


def _selected_tasks(run: dict[str, Any], query: str, name: str) -> set[str] | None:
    """The tasks whose metrics the query reads (`[?display_name=='compare-models'] | [0]`),
    found by asking the same query for their names; None when it reads them all (or the
    answer is not names, as under length())."""
    try:
        found = jmespath.search(query.replace(f"outputs.metrics.{name}", "display_name"), run)
    except jmespath.exceptions.JMESPathError:
        return None
    if isinstance(found, str):
        return {found}
    if isinstance(found, list) and found and all(isinstance(f, str) for f in found):
        return set(found)
    return None


def _valid_query(p: dict[str, Any]) -> str | None:
    try:
        jmespath.compile(p["query"])
    except jmespath.exceptions.JMESPathError as exc:
        return f"query: invalid JMESPath: {exc}"
    if p.get("op", "==") not in OPS:
        return f"op: unknown comparison '{p['op']}' (use one of {', '.join(OPS)})"
    return None


def _pipeline_run(ctx: Context, p: dict[str, Any]) -> Outcome:
    from lab.backends import shapes

    run = ctx.backend.get(shapes.PIPELINE_RUN, p["name"], p.get("namespace", "default"))
    if run is None:
        return Outcome(False, f"no pipeline run named '{p['name']}'" + _others(
            ctx, shapes.PIPELINE_RUN, p["name"], p.get("namespace", "default")))
    state = shapes.state(run)
    want = p.get("state", "SUCCEEDED")
    if state != want:
        err = shapes.error_message(run)
        return Outcome(False, f"run state is {state}" + (f": {err}" if err else ""))
    art = p.get("artifact")
    if art:
        entry = shapes.artifact(run, art["task"], art["name"])
        problem = shapes.artifact_problem(entry, art["task"], art["name"], ctx.backend.root)
        if problem:
            return Outcome(False, problem)
    return Outcome(True, f"run state is {state}")


def _valid_artifact(p: dict[str, Any]) -> str | None:
    art = p.get("artifact")
    if art is not None and not (isinstance(art, dict) and {"task", "name"} <= set(art)):
        return "artifact: give a mapping with 'task' and 'name'"
    return None


def _file_exists(ctx: Context, p: dict[str, Any]) -> Outcome:
    path = ctx.workdir / p["path"]
    if not path.exists():
        return Outcome(False, f"{p['path']} does not exist")
    size = path.stat().st_size if path.is_file() else 1
    if size < p.get("min_bytes", 1):
        return Outcome(False, f"{p['path']} is empty")
    if "contains" in p:
        try:  # a learner's file: capped, and never a FIFO or a device
            text = read_bytes(path, limit=limits.MAX_CHECKED_FILE_BYTES).decode(
                "utf-8", errors="replace")
        except InputError as exc:
            return Outcome(False, f"{p['path']}: {exc.problem}")
        if not re.search(p["contains"], text):
            return Outcome(False, f"{p['path']} does not contain /{p['contains']}/")
    return Outcome(True, f"{p['path']} exists ({size} bytes)")


def _command(ctx: Context, p: dict[str, Any]) -> Outcome:
    try:
        proc = subprocess.run(
            [str(a) for a in p["argv"]], cwd=ctx.workdir, env=ctx.env or None,
            capture_output=True, text=True, timeout=p.get("run_timeout", 120), check=False,
        )
    except FileNotFoundError:
        return Outcome(False, f"command not found: {p['argv'][0]}")
    except subprocess.TimeoutExpired:
        return Outcome(False, "command timed out")
    want = p.get("exit_code", 0)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    # a Python traceback's last line names the error; the frames above it only add noise
    tail = lines[-1:] if "Traceback (most recent call last):" in lines else lines[-3:]
    if proc.returncode != want:
        return Outcome(False, f"exit code {proc.returncode} (want {want}): {' | '.join(tail)}")
    if "stdout" in p and not re.search(p["stdout"], proc.stdout):
        return Outcome(False, f"output does not match /{p['stdout']}/: {' | '.join(tail)}")
    return Outcome(True, f"exit code {proc.returncode}")


def _valid_argv(p: dict[str, Any]) -> str | None:
    argv = p["argv"]
    if not argv or not all(isinstance(a, str | int | float) for a in argv):
        return "argv: give a non-empty list of strings (no shell: one list item per argument)"
    return None


CHECK_TYPES: dict[str, CheckType] = {
    "condition": CheckType(
        {**RESOURCE, "name": Field(STR, True), "condition": Field(STR, True),
         "status": Field(STR, choices=("True", "False", "Unknown"))},
        _condition,
    ),
    "field": CheckType(
        {**RESOURCE, "query": Field(STR, True), "op": Field(STR), "value": Field(ANY)},
        _field, _valid_query,
    ),
    "pipeline-run": CheckType(
        {"name": Field(STR, True), "namespace": Field(STR),
         "state": Field(STR, choices=("SUCCEEDED", "FAILED", "RUNNING", "CANCELED")),
         "artifact": Field(DICT)},
        _pipeline_run, _valid_artifact,
    ),
    "file-exists": CheckType(
        {"path": Field(STR, True), "min_bytes": Field((int,)), "contains": Field(STR)},
        _file_exists,
    ),
    "command": CheckType(
        {"argv": Field(LIST, True), "exit_code": Field((int,)), "stdout": Field(STR),
         "run_timeout": Field(NUM)},
        _command, _valid_argv,
    ),
}


def _json_file(ctx: Context, p: dict[str, Any]) -> Outcome:
    """A JMESPath query over a JSON file the learner's code wrote (e.g. metrics)."""
    path = ctx.workdir / p["path"]
    if not path.exists():
        return Outcome(False, f"{p['path']} does not exist")
    try:
        data = load_json(read_text(path), p["path"])
    except InputError as exc:
        return Outcome(False, f"{p['path']} is not readable JSON: {exc.problem}")
    value = jmespath.search(p["query"], data)
    return Outcome(compare(value, p.get("op", "=="), p.get("value")),
                   f"{p['query']} = {value!r}")


def _logs(ctx: Context, p: dict[str, Any]) -> Outcome:
    """Every listed replica's log has a line matching `contains` (e.g. each rank reported)."""
    kind = lookup(p["kind"]).kind
    missing = []
    for replica in p["replicas"]:
        try:
            lines = ctx.backend.logs(kind, p["name"], p.get("namespace", "default"), replica)
            found = any(re.search(p["contains"], line) for line in lines)
        except LabError as exc:
            return Outcome(False, str(exc).splitlines()[0])
        if not found:
            missing.append(str(replica))
    if missing:
        return Outcome(False, f"no line matching /{p['contains']}/ in: {', '.join(missing)}")
    return Outcome(True, f"{len(p['replicas'])} replica log(s) match /{p['contains']}/")


def _valid_logs(p: dict[str, Any]) -> str | None:
    if not p["replicas"] or not all(isinstance(r, str) for r in p["replicas"]):
        return "replicas: give a list of replica names, e.g. [master-0, worker-0]"
    try:
        re.compile(p["contains"])
    except re.error as exc:
        return f"contains: invalid regular expression: {exc}"
    return None


def _gpus(ctx: Context, p: dict[str, Any]) -> Outcome:
    """How many GPUs the backend can give workloads (a precondition for GPU steps), and,
    with `capability` ("8.0": bf16), how many of them have at least that CUDA compute
    capability. A backend that cannot tell capabilities (a cluster) passes that part; the
    step's own script checks it where it runs."""
    gpus = getattr(ctx.backend, "gpus", None)
    found = list(gpus()) if gpus else []
    want = p.get("min", 1)
    where = f"{ctx.backend.name} backend"
    if len(found) < want:
        why = getattr(ctx.backend, "gpu_why", None)
        reason = why() if why else ""
        return Outcome(False, f"{len(found)} GPU(s) on the {where}, {want} needed"
                              + (f": {reason}" if reason else ""))
    if p.get("capability"):
        need = _capability(str(p["capability"]))
        caps = getattr(ctx.backend, "gpu_capabilities", None)
        if caps is None:
            return Outcome(True, f"{len(found)} GPU(s) on the {where} (compute capability "
                                 f"not known here)")
        known = caps()
        good = [g for g in found if (c := known.get(g)) is not None and c >= need]
        seen = ", ".join(sorted({f"{c[0]}.{c[1]}" if c else "unknown"
                                 for c in (known.get(g) for g in found)}))
        if len(good) < want:
            return Outcome(False, f"{len(good)} of the {len(found)} GPU(s) on the {where} "
                                  f"have compute capability {p['capability']} or newer "
                                  f"({want} needed; here: {seen})")
        return Outcome(True, f"{len(good)} GPU(s) with compute capability {p['capability']} "
                             f"or newer on the {where}")
    return Outcome(True, f"{len(found)} GPU(s) on the {where}")


def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def _valid_capability(p: dict[str, Any]) -> str | None:
    cap = p.get("capability")
    if cap is None:
        return None
    if not re.fullmatch(r"\d+(\.\d+)?", str(cap)):
        return f'capability: a CUDA compute capability such as "8.0", got {cap!r}'
    return None


CHECK_TYPES.update({
    "json-file": CheckType(
        {"path": Field(STR, True), "query": Field(STR, True), "op": Field(STR),
         "value": Field(ANY)},
        _json_file, _valid_query,
    ),
    "logs": CheckType(
        {**RESOURCE, "name": Field(STR, True), "replicas": Field(LIST, True),
         "contains": Field(STR, True)},
        _logs, _valid_logs,
    ),
    "gpus": CheckType({"min": Field((int,)), "capability": Field((str, int, float))}, _gpus,
                      _valid_capability),
})

COMMON_FIELDS = {"type", "title", "message", "timeout"}


def register(name: str, check_type: CheckType) -> None:
    """Add a check type (backends' feature modules use this, e.g. http-predict)."""
    CHECK_TYPES[name] = check_type


# Waiting is reported as (outcome so far, seconds waited, seconds it may wait).
OnWait = Callable[[Outcome, float, float], None]


def _resource(check: Check) -> tuple[str, str, str] | None:
    """(kind, name, namespace) of the one resource a check reads, or None."""
    p = check.params
    if check.type == "pipeline-run":
        return "PipelineRun", p["name"], p.get("namespace", "default")
    if "kind" in p and "name" in p and check.type in ("condition", "field", "logs"):
        return p["kind"], p["name"], p.get("namespace", "default")
    return None


def failure(check: Check, ctx: Context) -> str | None:
    """Why the resource the check reads has failed (its status says so), or None."""
    from lab.backends import failures

    target = _resource(check)
    if target is None:
        return None
    try:
        found = failures.explain(ctx.backend, ctx.backend.get(*target))
    except Exception:  # the check's own outcome stands
        return None
    return found.one_line() if found else None


def settled(ctx: Context) -> bool:
    """Whether nothing on the backend is running that could change a check's outcome (no
    run, experiment or job in progress, no server starting). A backend that cannot tell
    (a cluster, whose controllers act on their own) is never settled: checks wait there."""
    busy = getattr(ctx.backend, "in_progress", None)
    if busy is None:
        return False
    try:
        return not busy()
    except Exception:  # cannot tell: wait, as before
        return False


def evaluate(check: Check, ctx: Context, *, wait: bool = True,
             on_wait: OnWait | None = None) -> Outcome:
    """Evaluate until it holds or its timeout passes (once only when `wait` is False). A
    resource that has failed ends the wait at once: waiting cannot make it pass. So does a
    backend where nothing is running (`settled`): a file that is not there, or a resource
    that does not exist, stays so until the learner acts; while a run, a job or a server
    that could change the outcome is in progress, the check waits as long as it may."""
    impl = CHECK_TYPES[check.type].evaluate
    start = time.monotonic()
    deadline = start + (check.timeout if wait else 0)
    while True:
        try:
            outcome = impl(ctx, check.params)
        except Exception as exc:  # a check must report, never crash the runner
            outcome = Outcome(False, f"error while checking: {exc}")
        if outcome.ok:
            return outcome
        why = outcome.failed or failure(check, ctx)
        if why is not None:
            return Outcome(False, outcome.observed, why)
        if time.monotonic() >= deadline or settled(ctx):
            return outcome
        if on_wait is not None:
            on_wait(outcome, time.monotonic() - start, check.timeout)
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


register("http-predict", CheckType(
    {"name": Field(STR, True), "namespace": Field(STR), "protocol": Field(STR,
                                                                        choices=("v1", "v2")),
     "request": Field(DICT), "instances": Field(LIST), "file": Field(STR),
     "expect": Field(ANY), "tolerance": Field(NUM), "differ_from": Field(STR)},
    lambda ctx, p: Outcome(*prediction.check(ctx, p)), prediction.valid_check,
))
