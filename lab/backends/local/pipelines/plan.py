"""A compiled pipeline checked before anything of it runs: the Plan (what each executor runs),
or Refused, saying why the local backend cannot run it.

Checked here, in one pass over the IR: the structure (every component, executor and
upstream task exists; no cycle of dependentTasks or of components; task names that can be
folder names; ParallelFor lists and CEL conditions within the limits), the executors (a
lightweight component's command, whose pip packages must be installed here; an importer;
nothing that runs an image), and the kfp-kubernetes settings that need a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lab.backends.local.pipelines import cel, taskproc
from lab.errors import LabError


class Refused(LabError):
    """The pipeline uses something the local backend cannot run: said before the run."""


@dataclass
class Plan:
    """The compiled pipeline, checked: what each executor runs."""

    spec: Any  # pipeline_spec_pb2.PipelineSpec
    executors: dict[str, Any]
    programs: dict[str, taskproc.Program] = field(default_factory=dict)
    # what compiling it read: {"files": {path: sha256 or None}, "dirs": {folder: listing},
    # "env": {name: value}} (replay.py); empty: nothing to key a memo on
    inputs: dict[str, Any] = field(default_factory=dict)


def plan(spec: Any, platform_spec: Any = None) -> Plan:
    """Check everything the run would need, before anything runs (Refused says why)."""
    from google.protobuf import json_format
    from kfp.local import utils

    try:
        executors = {name: utils.struct_to_executor_spec(ex)
                     for name, ex in spec.deployment_spec["executors"].items()}
    except (json_format.ParseError, TypeError, ValueError, KeyError) as exc:
        raise Refused(f"not a valid compiled pipeline: deploymentSpec.executors: {exc}",
                      hint=RECOMPILE) from None
    invalid = structure_problems(spec, executors)
    if invalid:
        raise Refused("not a valid compiled pipeline: " + "; ".join(invalid[:5])
                      + (f" (and {len(invalid) - 5} more)" if len(invalid) > 5 else ""),
                      hint=RECOMPILE)
    out = Plan(spec, executors)
    problems: list[str] = []
    for label, ex in executors.items():
        kind = ex.WhichOneof("spec")
        if kind == "importer":
            continue
        if kind != "container":
            problems.append(f"{label}: a {kind} executor has no local equivalent")
            continue
        program = taskproc.parse(list(ex.container.command))
        if program is None or list(ex.container.args[:1]) != ["--executor_input"]:
            problems.append(
                f"{label}: a container component (image {ex.container.image}) runs an "
                "image's command; the local backend runs no images, only lightweight "
                "@dsl.component functions")
            continue
        missing = taskproc.missing_packages(program.requirements)
        if missing:
            problems.append(f"{label}: packages_to_install not installed here: "
                            f"{', '.join(missing)} (the local backend downloads nothing: "
                            "pip install them into kflab's environment)")
        out.programs[label] = program
    for name, comp in [*spec.components.items(), ("root", spec.root)]:
        if comp.WhichOneof("implementation") != "dag":
            continue
        for tname, task in comp.dag.tasks.items():
            if task.WhichOneof("iterator") == "artifact_iterator":
                problems.append(f"{name}/{tname}: dsl.ParallelFor over a list of artifacts "
                                "is not supported locally")
    k8s = _platform_settings(platform_spec)
    if k8s:
        problems.append("kfp-kubernetes settings (" + ", ".join(k8s) + ") need a cluster")
    if problems:
        raise Refused("the local backend cannot run this pipeline: " + "; ".join(problems),
                      hint="run it on the cluster backend, or change what is named")
    return out


RECOMPILE = "compile the pipeline again with kfp.compiler.Compiler().compile() (a compiled " \
            "file is not meant to be edited by hand)"


# Task names become folders and log files in the state folder (`<run>/<task>.<i>/`).
_TASK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def structure_problems(spec: Any, executors: dict[str, Any]) -> list[str]:
    """What makes the IR impossible to run as written, found before anything runs: unknown
    components, executors or upstream tasks, a cycle of dependentTasks or of components,
    task names that are not plain names, ParallelFor lists and conditions over the limits."""
    out: list[str] = []
    comps = dict(spec.components)
    graph: dict[str, list[str]] = {}
    for cname, comp in [*comps.items(), ("root", spec.root)]:
        kind = comp.WhichOneof("implementation")
        if kind != "dag":
            if comp.executor_label not in executors:
                out.append(f"components.{cname}.executorLabel: no executor "
                           f"{comp.executor_label!r} in deploymentSpec.executors")
            continue
        tasks = dict(comp.dag.tasks)
        graph[cname] = []
        for tname, task in tasks.items():
            where = f"{'root' if cname == 'root' else 'components.' + cname}.dag.tasks"
            if not _TASK_NAME.match(tname) or ".." in tname:
                out.append(f"{where}: task name {tname[:60]!r} is not a plain name (letters, "
                           "digits, '-', '_', '.'; at most 128)")
                continue
            ref = task.component_ref.name
            if ref not in comps:
                out.append(f"{where}.{tname}.componentRef.name: no component {ref!r}")
            else:
                graph[cname].append(ref)
            for dep in task.dependent_tasks:
                if dep not in tasks:
                    out.append(f"{where}.{tname}.dependentTasks: no task {dep!r} in this DAG")
            condition = task.trigger_policy.condition
            if condition:
                try:
                    cel.check(condition)
                except LabError as exc:
                    out.append(f"{where}.{tname}.triggerPolicy.condition: {exc.args[0]}")
            if task.WhichOneof("iterator") == "parameter_iterator" and \
                    task.parameter_iterator.items.HasField("raw"):
                problem = _items_problem(task.parameter_iterator.items.raw)
                if problem:
                    out.append(f"{where}.{tname}.parameterIterator.items.raw: {problem}")
        cycle = _cycle({n: [d for d in t.dependent_tasks if d in tasks]
                        for n, t in tasks.items()})
        if cycle:
            out.append(f"{'root' if cname == 'root' else 'components.' + cname}.dag: "
                       f"dependentTasks form a cycle: {' -> '.join(cycle)}")
    cycle = _cycle(graph)
    if cycle:
        out.append(f"components: a DAG contains itself: {' -> '.join(cycle)}")
    return out


def _items_problem(raw: str) -> str | None:
    """Why a ParallelFor's literal items cannot run (None when they can)."""
    from lab import limits
    from lab.errors import InputError
    from lab.yamlio import load_json

    try:
        items = load_json(raw, "items")
    except InputError as exc:
        return exc.problem
    if not isinstance(items, list):
        return f"not a JSON list: {raw[:60]!r}"
    if len(items) > limits.MAX_PARALLELFOR_ITEMS:
        return limits.limit("a ParallelFor of", f"{len(items)} items",
                            limits.MAX_PARALLELFOR_ITEMS, "MAX_PARALLELFOR_ITEMS")
    return None


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    """One cycle of the graph as a path (first node repeated at the end), or []."""
    color: dict[str, int] = {}
    for start in graph:
        if color.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            nexts = graph.get(node, [])
            if i < len(nexts):
                stack.append((node, i + 1))
                nxt = nexts[i]
                if color.get(nxt) == 1:
                    return [*path[path.index(nxt):], nxt]
                if not color.get(nxt):
                    stack.append((nxt, 0))
            else:
                color[node] = 2
                path.pop()
    return []


def _platform_settings(platform_spec: Any) -> list[str]:
    if platform_spec is None:
        return []
    from google.protobuf import json_format

    data = json_format.MessageToDict(platform_spec)
    k8s = (data.get("platforms") or {}).get("kubernetes") or {}
    execs = (k8s.get("deploymentSpec") or {}).get("executors") or {}
    found = sorted({f"{label}: {', '.join(cfg)}" for label, cfg in execs.items() if cfg})
    if (k8s.get("pipelineConfig") or {}).get("workspace"):
        found.append("dsl.PipelineConfig's workspace: a PVC the run's tasks share")
    return found
