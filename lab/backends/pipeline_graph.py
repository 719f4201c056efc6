"""The shape of a compiled pipeline, as the KFP UI draws it: every DAG's tasks with the tasks
they wait for, sub-DAGs nested in the task that runs them.

Read from the PipelineSpec IR (`root.dag.tasks`, `components.<name>.dag.tasks`; each task's
`dependentTasks`, `componentRef`, `triggerPolicy`, `parameterIterator`, `iteratorPolicy`), the
same fields the KFP UI 2.16 reads for its graph (frontend/src/lib/v2/StaticFlow.ts builds a
node per task and an edge per dependentTasks entry; a task whose component is a DAG is a
sub-DAG node). It is stored with a local run (`status.graph`), so a page draws tasks that have
not started yet, and drawn for a pipeline version on the pipeline's page.

A node: {"name", "deps": [task names], "kind"}, where kind is "task" (runs an executor),
"dag" (a sub-pipeline), "condition" (dsl.If/Elif/Else: its `condition` is the CEL
expression), "branches" (the group of an If/Elif/Else), "exit-handler" (dsl.ExitHandler's
body) or "loop" (dsl.ParallelFor: `items` is the list given, or the input it comes from, and
`parallelism` the iteration limit), with "tasks" (its DAG's nodes) for all but "task";
"exit": true for a task that runs whatever its upstream tasks' states (the ExitHandler's exit
task, ignore_upstream_failure).
"""

from __future__ import annotations

import re
from typing import Any

MAX_NODES = 5000  # a graph past this is not drawn (the page says so); IR limits come first
MAX_DEPTH = 64    # nesting, as the KFP UI's own limit on sub-DAG layers


class TooLarge(ValueError):
    pass


def graph(spec: Any) -> dict[str, Any] | None:
    """{"tasks": [...]} of the root DAG of a PipelineSpec given as JSON/YAML data (camelCase,
    as the compiler writes it), or None when it is not one or is too large to draw."""
    if isinstance(spec, dict) and isinstance(spec.get("pipeline_spec"), dict):
        spec = spec["pipeline_spec"]  # {pipeline_spec, platform_spec}, as kfp.Client sends it
    if not isinstance(spec, dict) or not isinstance(spec.get("root"), dict):
        return None
    comps = spec.get("components") if isinstance(spec.get("components"), dict) else {}
    count = [0]
    try:
        return {"tasks": _dag(spec["root"], comps, count, 0, ())}
    except (TooLarge, RecursionError):
        return None


def _dag(comp: Any, comps: dict[str, Any], count: list[int], depth: int,
         seen: tuple[str, ...]) -> list[dict[str, Any]]:
    tasks = ((comp or {}).get("dag") or {}).get("tasks") if isinstance(comp, dict) else None
    if not isinstance(tasks, dict):
        return []
    if depth > MAX_DEPTH:
        raise TooLarge("nested too deeply")
    out = []
    # in the order the compiler numbers tasks (condition-2 before condition-10): a protobuf
    # map (the IR read from a compiled run) keeps no order, and If, Elif, Else read in order
    for name, task in sorted(tasks.items(), key=lambda kv: _natural(str(kv[0]))):
        if not isinstance(task, dict):
            continue
        count[0] += 1
        if count[0] > MAX_NODES:
            raise TooLarge("too many tasks")
        ref = (task.get("componentRef") or {}).get("name")
        deps = [str(d) for d in task.get("dependentTasks") or [] if isinstance(d, str)]
        node: dict[str, Any] = {"name": str(name), "deps": [d for d in deps if d in tasks]}
        policy = task.get("triggerPolicy") if isinstance(task.get("triggerPolicy"), dict) else {}
        if policy.get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED":
            node["exit"] = True
        child = comps.get(ref) if isinstance(ref, str) else None
        is_dag = isinstance(child, dict) and isinstance(child.get("dag"), dict)
        if "parameterIterator" in task or "artifactIterator" in task:
            node["kind"] = "loop"
            it = task.get("parameterIterator") or task.get("artifactIterator") or {}
            items = it.get("items") if isinstance(it, dict) else None
            if isinstance(items, dict) and "raw" in items:
                node["items"] = str(items["raw"])[:500]
            elif isinstance(items, dict) and items.get("inputParameter"):
                node["items_from"] = str(items["inputParameter"])
            limit = (task.get("iteratorPolicy") or {}).get("parallelismLimit")
            if isinstance(limit, int) and limit > 0:
                node["parallelism"] = limit
        elif is_dag and policy.get("condition"):
            node["kind"] = "condition"
            node["condition"] = str(policy["condition"])[:500]
            node["reads"] = readable(node["condition"])
        elif is_dag and str(name).startswith("condition-branches-"):
            node["kind"] = "branches"
        elif is_dag and str(name).startswith("exit-handler-"):
            node["kind"] = "exit-handler"
        elif is_dag:
            node["kind"] = "dag"
        else:
            node["kind"] = "task"
            if policy.get("condition"):  # a condition on a task itself (rare in the IR)
                node["condition"] = str(policy["condition"])[:500]
        if node["kind"] != "task" and is_dag:
            if ref in seen:
                raise TooLarge("a component runs itself")
            node["tasks"] = _dag(child, comps, count, depth + 1, (*seen, ref))
        out.append(node)
    return out


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


_CHANNEL = re.compile(r"((?:int|double|string|bool)\()?inputs\.parameter_values"
                      r"\['pipelinechannel--([^']+)'\](?(1)\))")


def readable(condition: str) -> str:
    """A condition as the pipeline's code says it: `int(inputs.parameter_values[
    'pipelinechannel--flip-Output']) > 2` reads `flip.output > 2`, a ParallelFor item
    `item`, a pipeline parameter its name."""
    def name(m: re.Match[str]) -> str:
        channel = m.group(2)
        if channel.startswith("loop-item-param-"):
            return "item"
        task, sep, output = channel.rpartition("-")
        return f"{task}.{output.lower()}" if sep and output[:1].isupper() else channel
    return _CHANNEL.sub(name, condition)
