"""Nested DAGs on the local backend, as `kflab ui` draws them: a real run of
tests/data/pipelines/nested.py (a sub-pipeline used twice, so two tasks named `double`; an
ExitHandler around a ParallelFor with a dsl.If per iteration; If/Elif/Else). The run keeps
the two `double` tasks apart (their folders, logs and outputs), records where each task
runs (`parent`) and the pipeline's whole graph (`status.graph`, from the IR), and the UI's
JSON (lab/webui/run_page.py) names every task by its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lab.backends import shapes
from lab.backends.local import LocalBackend
from lab.backends.pipeline_graph import graph, readable
from lab.errors import LabError
from lab.scenarios.actions import pipeline_run_manifest
from lab.webui import views

DATA = Path(__file__).resolve().parents[1] / "data" / "pipelines"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalBackend, dict[str, Any]]:
    backend = LocalBackend(str(tmp_path_factory.mktemp("state")))
    obj = backend.apply(pipeline_run_manifest("nested.py", "nested", function="nested"),
                        base_dir=DATA)
    assert shapes.state(obj) == "SUCCEEDED", shapes.error_message(obj)
    return backend, obj


def test_two_tasks_of_one_name_in_two_sub_dags_are_kept_apart(run: Any) -> None:
    backend, obj = run
    tasks = {shapes.task_path(t): t for t in shapes.tasks(obj)}
    out = {p: (t.get("outputs") or {}).get("parameters", {}).get("Output")
           for p, t in tasks.items()}
    # each `double` has its own folder and outputs: 3 -> 6 -> 12, and the exit handler's 6
    assert out["double-pipeline/double"] == 6 and out["double-pipeline-2/double"] == 12
    assert out["exit-handler-1/double"] == 6
    assert [t["display_name"] for t in shapes.tasks(obj)].count("double") == 3
    root = Path(obj["status"]["pipeline_root"])
    for path in ("double-pipeline/double", "double-pipeline-2/double", "exit-handler-1/double"):
        assert (root / path / "executor_input.json").is_file()
    # the iterations and their conditions, under the loop; the condition false for item 1
    assert tasks["exit-handler-1/for-loop-3"]["iterations"] == 3
    assert out["exit-handler-1/for-loop-3/double-2.2"] == 6
    assert tasks["exit-handler-1/for-loop-3/condition-4.0"]["state"] == "SKIPPED"
    assert out["exit-handler-1/for-loop-3/condition-4.2/double-3.2"] == 12
    # each task's log lines are its own; a name three tasks have is refused with their paths
    lines = list(backend.logs("PipelineRun", "nested", replica="double-pipeline-2/double"))
    assert any("double of 6" in line for line in lines), lines[-5:]
    assert not any("double of 3" in line for line in lines)
    with pytest.raises(LabError, match="more than one task 'double'") as err:
        list(backend.logs("PipelineRun", "nested", replica="double"))
    assert "double-pipeline-2/double" in err.value.hint
    # a display name one task has is still enough
    assert any("double of 1" in line for line in
               backend.logs("PipelineRun", "nested", replica="double-2.0"))


def test_the_run_keeps_the_pipelines_whole_graph(run: Any) -> None:
    _, obj = run
    g = obj["status"]["graph"]
    top = {n["name"]: n for n in g["tasks"]}
    assert top["double-pipeline"]["kind"] == "dag"
    assert top["double-pipeline-2"]["deps"] == ["double-pipeline"]
    assert [n["name"] for n in top["double-pipeline-2"]["tasks"]] == ["double"]
    assert top["report"]["exit"] is True and top["report"]["deps"] == ["exit-handler-1"]
    body = {n["name"]: n for n in top["exit-handler-1"]["tasks"]}
    assert top["exit-handler-1"]["kind"] == "exit-handler"
    loop = body["for-loop-3"]
    assert (loop["kind"], loop["items"], loop["parallelism"]) == ("loop", "[1, 2, 3]", 2)
    inner = {n["name"]: n for n in loop["tasks"]}
    assert inner["condition-4"]["kind"] == "condition"
    assert inner["condition-4"]["deps"] == ["double-2"]
    assert inner["condition-4"]["reads"] == "item > 1"
    branches = body["condition-branches-5"]
    assert branches["kind"] == "branches" and branches["deps"] == ["double"]
    assert [b["reads"] for b in branches["tasks"]] == [
        "double.output > 5", "!(double.output > 5) && double.output > 2",
        "!(double.output > 5) && !(double.output > 2)"]


def test_graph_of_what_is_not_a_pipeline() -> None:
    assert graph(None) is None and graph({"root": 5}) is None and graph([]) is None
    # a component that runs itself is not drawn (the engine refuses it before it runs)
    loop = {"root": {"dag": {"tasks": {"a": {"componentRef": {"name": "comp-a"}}}}},
            "components": {"comp-a": {"dag": {"tasks": {"b": {"componentRef": {
                "name": "comp-a"}}}}}}}
    assert graph(loop) is None
    assert readable("inputs.parameter_values['pipelinechannel--n'] > 1") == "n > 1"


def test_the_ui_json_names_tasks_by_path(run: Any) -> None:
    backend, obj = run
    page = views.answer(backend, None, "runs/nested")
    by_key = {t["key"]: t for t in page["tasks"]}
    assert by_key["double-pipeline-2/double"]["parent"] == "double-pipeline-2"
    assert page["graph"] == obj["status"]["graph"]
    assert page["duration_s"] is not None and page["duration_s"] != int(page["duration_s"])
    # by the run's id too (the links kfp.Client prints)
    assert views.answer(backend, None, f"runs/{obj['status']['run_id']}")["name"] == "nested"
    # the side panel of one `double`: its input and its log, not the other's
    panel = views.answer(backend, None, "runs/nested/tasks/double-pipeline-2%2Fdouble")
    assert panel["inputs"]["parameters"] == {"num": 6}
    assert any("double of 6" in line for line in panel["log"])
    assert panel["parameters"] == {"Output": 12}
    # a DAG task has no log of its own
    assert views.answer(backend, None, "runs/nested/tasks/double-pipeline-2")["log"] is None
    with pytest.raises(views.NotFound, match="more than one task 'double'"):
        views.answer(backend, None, "runs/nested/tasks/double")
