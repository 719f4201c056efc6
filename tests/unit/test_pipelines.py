"""Pipeline runs on the local backend: the recorded status has the KFP Run shape checks read."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.backends.local.pipelines.runner import parse_arguments
from lab.errors import InputError, LabError
from lab.scenarios.actions import pipeline_run_manifest

DATA = Path(__file__).resolve().parents[1] / "data" / "pipelines"


def run(state: Path, name: str, **arguments):
    backend = LocalBackend(str(state))
    events: list[dict] = []
    backend.sink = events.append
    obj = backend.apply(pipeline_run_manifest("tiny.py", name, arguments), base_dir=DATA)
    return backend, obj, events


def test_successful_run_records_tasks_metrics_and_artifacts(state: Path) -> None:
    backend, obj, events = run(state, "ok", n=7)
    status = obj["status"]
    assert status["state"] == "SUCCEEDED" and status["error"] is None
    tasks = {t["display_name"]: t for t in status["run_details"]["task_details"]}
    assert list(tasks) == ["make", "train"]
    assert tasks["make"]["outputs"]["parameters"]["Output"] == 14
    assert tasks["train"]["outputs"]["metrics"] == {"accuracy": 0.7}
    model = tasks["train"]["outputs"]["artifacts"]["model"]
    assert model["type"] == "system.Model" and Path(model["path"]).read_text() == "weights"
    assert [e["event"] for e in events if e["event"].startswith("task-")] == [
        "task-started", "task-finished", "task-started", "task-finished"]
    # Another process (kflab check) reads the same object from the state folder.
    assert LocalBackend(str(state)).get("PipelineRun", "ok") == obj
    assert any(line.startswith("[make] ") for line in backend.logs("PipelineRun", "ok"))


def test_failed_task_is_recorded_not_raised(state: Path) -> None:
    _, obj, _ = run(state, "bad", fail=True)
    status = obj["status"]
    assert status["state"] == "FAILED"
    assert "train" in status["error"]["message"]
    states = {t["display_name"]: t["state"] for t in status["run_details"]["task_details"]}
    assert states == {"make": "SUCCEEDED", "train": "FAILED"}


def test_missing_file_and_bad_function_name(state: Path, tmp_path: Path) -> None:
    backend = LocalBackend(str(state))
    with pytest.raises(InputError, match="pipeline file not found"):
        backend.apply(pipeline_run_manifest("nope.py", "x"), base_dir=tmp_path)
    with pytest.raises(InputError, match="no pipeline named 'other'"):
        backend.apply(pipeline_run_manifest("tiny.py", "x", function="other"), base_dir=DATA)


def test_file_without_pipeline(state: Path, tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(InputError, match=r"no @dsl\.pipeline"):
        LocalBackend(str(state)).apply(pipeline_run_manifest("empty.py", "x"),
                                       base_dir=tmp_path)


def test_parse_arguments() -> None:
    assert parse_arguments(["a=1", "b=0.5", "c=text", "d=[1,2]", "e=true"]) == {
        "a": 1, "b": 0.5, "c": "text", "d": [1, 2], "e": True}
    with pytest.raises(LabError):
        parse_arguments(["novalue"])


def test_reloading_a_pipeline_folder_forgets_only_the_learners_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sibling module edited between two loads is imported again; an installed package
    under the same folder (a project's own .venv) and kflab's own modules (a pipeline at the
    root of a kflab clone) are not: second copies of kfp's or kflab's classes break runs."""
    import importlib
    import sys

    from lab.backends.local.pipelines.runner import KFLAB_PACKAGE, _forget_modules_under

    site = tmp_path / ".venv" / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / "kflab_test_sibling.py").write_text("X = 1\n")
    (site / "kflab_test_installed.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(site))
    try:
        installed = importlib.import_module("kflab_test_installed")
        importlib.import_module("kflab_test_sibling")
        runner = sys.modules["lab.backends.local.pipelines.runner"]
        _forget_modules_under(tmp_path)
        assert "kflab_test_sibling" not in sys.modules
        assert sys.modules["kflab_test_installed"] is installed
        _forget_modules_under(KFLAB_PACKAGE)
        assert sys.modules["lab.backends.local.pipelines.runner"] is runner
    finally:
        for name in ("kflab_test_sibling", "kflab_test_installed"):
            sys.modules.pop(name, None)


def test_a_renamed_task_keeps_its_task_key_in_task_details(state: Path, tmp_path: Path) -> None:
    """As KFP 2.16's run API lists it: task_details[].display_name is the Argo node's
    displayName (apiserver api_converter.go toModelTask), and the Argo DAG task of a KFP
    task is named by its key in the compiled DAG (v2/compiler/argocompiler/dag.go: DAG ->
    task(taskName, ...) -> containerExecutorTask(name, ...)). `.set_display_name()` only
    sets taskInfo.name, which the driver writes to the ML Metadata execution's display_name
    (driver/container.go) and the KFP UI draws; the run API does not show it."""
    (tmp_path / "renamed.py").write_text(
        "from kfp import dsl\n\n"
        "@dsl.component(install_kfp_package=False)\n"
        "def add(a: int) -> int:\n    return a + 1\n\n"
        "@dsl.pipeline\n"
        "def renamed():\n"
        "    first = add(a=1).set_display_name('First step')\n"
        "    add(a=first.output)\n")
    backend = LocalBackend(str(state))
    obj = backend.apply(pipeline_run_manifest("renamed.py", "renamed"), base_dir=tmp_path)
    assert obj["status"]["state"] == "SUCCEEDED"
    names = [t["display_name"] for t in obj["status"]["run_details"]["task_details"]]
    assert sorted(names) == ["add", "add-2"]
    assert any(line.startswith("[add] ") for line in backend.logs("PipelineRun", "renamed"))
