"""What KFP's driver and launcher do around one task or DAG on a cluster, done here as KFP
2.16 does it: which tasks a task waits for, a DAG's arguments and outputs, a STRING input's
text, whole numbers as JSON integers, an output written at a custom path.

Each function names the upstream code it follows (kubeflow/pipelines backend/src/v2/driver,
compiler/argocompiler, component/launcher_v2.go); engine.py calls them as it walks a DAG.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any


def depends(task: Any, tasks: dict[str, Any]) -> list[str]:
    """The tasks `task` waits for: its dependent_tasks plus the producer of every task
    output it takes, as KFP 2.16's Argo compiler adds them (backend/src/v2/compiler/
    argocompiler/dag.go, addImplicitDependencies: a resource limit set from a task's output
    is such an input, with no dependent_tasks entry)."""
    deps = list(task.dependent_tasks)
    producers = [p.task_output_parameter.producer_task for p in task.inputs.parameters.values()
                 if p.WhichOneof("kind") == "task_output_parameter"]
    producers += [a.task_output_artifact.producer_task for a in task.inputs.artifacts.values()
                  if a.WhichOneof("kind") == "task_output_artifact"]
    deps += [p for p in producers if p in tasks and p not in deps]
    return deps


def upload_custom_paths(task_root: Path) -> None:
    """An output artifact written at a path of the component's choosing (Artifact.set_path)
    is copied to its URI, as KFP 2.16's launcher uploads it from there
    (backend/src/v2/component/launcher_v2.go, uploadOutputArtifacts with
    retrieveArtifactPath: the custom path when set, else the URI's local path)."""
    import shutil

    from lab import limits
    from lab.errors import InputError
    from lab.yamlio import read_json

    try:  # written by the task's own code: capped and depth-bounded
        data = read_json(task_root / "executor_output.json", limit=limits.MAX_RECORD_BYTES)
    except InputError:
        return
    if not isinstance(data, dict):
        return
    for group in (data.get("artifacts") or {}).values():
        for art in group.get("artifacts") or []:
            src, uri = art.get("custom_path"), art.get("uri", "")
            if not src or not uri or not Path(src).exists() or Path(uri).exists():
                continue
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            if Path(src).is_dir():
                shutil.copytree(src, uri)
            else:
                shutil.copyfile(src, uri)


def json_numbers(value: Any) -> Any:
    """Whole numbers written as JSON integers, as the KFP backend's protojson writes a
    protobuf Value (`1`, not Python's `1.0`): a list of ints collected from a ParallelFor
    reaches the next component as ints, as on a cluster."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: json_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_numbers(v) for v in value]
    return value


def with_defaults(comp: Any, args: dict[str, Any]) -> dict[str, Any]:
    """A DAG's arguments with its inputs' defaults; an optional input without a default (or
    defaulting to None) stays unset, as the driver leaves it."""
    from kfp.local.executor_output_utils import pb2_value_to_python

    out = dict(args)
    for name, spec in comp.input_definitions.parameters.items():
        if name in out:
            continue
        if spec.HasField("default_value") and \
                spec.default_value.WhichOneof("kind") not in (None, "null_value"):
            out[name] = pb2_value_to_python(spec.default_value)
        elif spec.is_optional:
            out[name] = None  # unset: a task given it gets nothing, its own default applies
    return out


def dag_outputs(comp: Any, store: Any) -> dict[str, Any]:
    """A DAG's outputs, each resolved on its own: one whose producer did not run (a branch
    of a dsl.If not taken) is absent, so a dsl.Collected over a loop holds the values of the
    iterations that produced one, as on a cluster."""
    from kfp.local.orchestrator.orchestrator_utils import OrchestratorUtils
    from kfp.pipeline_spec import pipeline_spec_pb2

    outputs: dict[str, Any] = {}
    spec = comp.dag.outputs
    for key, selector in spec.parameters.items():
        one = pipeline_spec_pb2.DagOutputsSpec()
        one.parameters[key].CopyFrom(selector)
        with contextlib.suppress(ValueError, KeyError):
            outputs.update(OrchestratorUtils.get_dag_outputs(dag_outputs_spec=one,
                                                             io_store=store))
    for key, selector in spec.artifacts.items():
        for each in selector.artifact_selectors:  # several: dsl.OneOf, the branch that ran
            one = pipeline_spec_pb2.DagOutputsSpec()
            one.artifacts[key].artifact_selectors.append(each)
            with contextlib.suppress(ValueError, KeyError):
                outputs.update(OrchestratorUtils.get_dag_outputs(dag_outputs_spec=one,
                                                                 io_store=store))
                break
    return outputs


def as_declared(comp: Any, args: dict[str, Any]) -> dict[str, Any]:
    """A STRING input given another value gets its text, as KFP 2.16's driver converts it
    (backend/src/v2/driver/resolve.go, handleParamTypeValidationAndConversion, with
    metadata.PbValueToText): 1 -> "1", true -> "true", a list or struct -> its JSON."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    string = pipeline_spec_pb2.ParameterType.STRING
    # an optional input the driver resolved to nothing is not passed: the component's own
    # default applies ("resolved internally within the component", resolve.go)
    out = {k: v for k, v in args.items() if v is not None}
    for name, spec in comp.input_definitions.parameters.items():
        value = out.get(name)
        if spec.parameter_type != string or value is None or isinstance(value, str):
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, float) and value.is_integer():
            out[name] = str(int(value))
        else:
            out[name] = json.dumps(value, separators=(",", ":")) if isinstance(
                value, (list, dict)) else str(value)
    return out


def artifact_types(comp: Any) -> dict[str, str]:
    return {a: d.artifact_type.schema_title for a, d in comp.output_definitions.artifacts.items()}
