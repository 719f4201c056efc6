"""What the upstream KFP SDK test pipelines (kubeflow/pipelines test_data/
sdk_compiled_pipelines, sdk-2.17.0-1) check on a cluster, in one small pipeline written here
(upstream files are not committed; docs/architecture.md lists each sample's outcome):

- critical/pipeline_with_placeholders.py: the run's placeholders given as input values
  arrive resolved (the resource name starts with the pipeline's name);
- critical/pipeline_with_input_status_state.py: an exit task's PipelineTaskFinalStatus has
  state COMPLETE and names the exit handler's DAG;
- collected_artifacts.py: dsl.Collected over nested ParallelFors gives one flat list;
- parallel_and_nested/nested_pipeline_opt_inputs_nil.py: an optional input a nested pipeline
  passes on unset reaches the component unset (its own default applies);
- pipeline_with_string_machine_fields_task_output.py: a resource limit taken from a task's
  output makes the task wait for that one (no dependent_tasks entry in the IR);
- critical/pipeline_with_artifact_custom_path.py: an output written at a custom path
  (Artifact.set_path) reaches the consumer;
- critical/pipeline_with_workspace.py: a pipeline workspace (a PVC) is refused before the run.

A real run, as `kflab pipeline run` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends import shapes
from lab.backends.local import LocalBackend
from lab.errors import InputError
from lab.scenarios.actions import pipeline_run_manifest

SAMPLE = '''
from typing import List
from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Output

@dsl.component(install_kfp_package=False)
def names(job_name: str, resource: str, job_id: str, task: str, task_id: str) -> str:
    for v in (job_name, resource, job_id, task, task_id):
        assert v and "{{" not in v, v
    assert task == "names" and resource.startswith("samples-"), (task, resource)
    return job_name

@dsl.component(install_kfp_package=False)
def make(text: str, out: Output[Artifact]):
    with open(out.path, "w") as fh:
        fh.write(text)

@dsl.component(install_kfp_package=False)
def count(items: List[Artifact]) -> int:
    return len([open(a.path).read() for a in items])

@dsl.component(install_kfp_package=False)
def status(s: dsl.PipelineTaskFinalStatus) -> str:
    return f"{s.state} {s.pipeline_task_name} {s.pipeline_job_resource_name}"

@dsl.component(install_kfp_package=False)
def custom(out: Output[Dataset]):
    import os, tempfile
    path = os.path.join(tempfile.gettempdir(), "custom-out")
    out.set_path(path)
    with open(path, "w") as fh:
        fh.write("hi")

@dsl.component(install_kfp_package=False)
def read(d: Input[Dataset]) -> str:
    return open(d.path).read()

@dsl.component(install_kfp_package=False)
def cpu() -> str:
    return "1"

@dsl.component(install_kfp_package=False)
def opt(n: int = None) -> str:
    return "unset" if n is None else str(n)

@dsl.pipeline
def nested(n: int = None):
    opt(n=n)

@dsl.pipeline(name="samples")
def samples():
    nested()
    read(d=custom().outputs["out"])
    exit_task = status()
    with dsl.ExitHandler(exit_task):
        limit = cpu()
        names(job_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
              resource=dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER,
              job_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
              task=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
              task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER).set_cpu_limit(limit.output)
        with dsl.ParallelFor(["a", "b"]) as outer:
            with dsl.ParallelFor(["x", "y", "z"]) as inner:
                made = make(text=inner)
        count(items=dsl.Collected(made.outputs["out"]))
'''

WORKSPACE = '''
from kfp import dsl

@dsl.component(install_kfp_package=False)
def write(path: str):
    open(path + "/f", "w").write("x")

@dsl.pipeline(pipeline_config=dsl.PipelineConfig(
    workspace=dsl.WorkspaceConfig(size="1Gi")))
def ws():
    write(path=dsl.WORKSPACE_PATH_PLACEHOLDER)
'''


def test_upstream_sample_checks_hold(state: Path, tmp_path: Path) -> None:
    (tmp_path / "samples.py").write_text(SAMPLE)
    obj = LocalBackend(str(state)).apply(
        pipeline_run_manifest("samples.py", "smp", function="samples"), base_dir=tmp_path)
    assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
    out = {t["display_name"]: (t.get("outputs") or {}).get("parameters", {})
           for t in shapes.tasks(obj)}
    assert out["names"]["Output"] == "smp"
    assert out["count"]["Output"] == 6  # 2 x 3, one flat list
    assert out["opt"]["Output"] == "unset"
    assert out["read"]["Output"] == "hi"
    state_, task, resource = out["status"]["Output"].split()
    assert (state_, task) == ("COMPLETE", "exit-handler-1")
    assert resource.startswith("samples-")


def test_pipeline_workspace_is_refused_before_the_run(state: Path, tmp_path: Path) -> None:
    (tmp_path / "ws.py").write_text(WORKSPACE)
    backend = LocalBackend(str(state))
    with pytest.raises(InputError, match="workspace"):
        backend.apply(pipeline_run_manifest("ws.py", "ws"), base_dir=tmp_path)
    assert backend.get("PipelineRun", "ws") is None
