"""How the cluster backend reads a KFP 2.16 run: the task list from task_details that are
Argo nodes, outputs from ML Metadata through the run's context, a task's pod from its node id.

The run objects here are what the KFP stand-in's report writes (tests/standins/kfp_argo.py,
held to upstream's fixture by test_kfp_standin_report.py); ML Metadata and the object store
are the stand-ins' real gRPC and S3 servers on 127.0.0.1. Mocked: the Kubernetes Secret read
for the object store's credentials (`_store_credentials`), which needs an API server; the
integration test (tests/integration/test_cluster_backend.py) covers it for real.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lab.backends import shapes
from lab.backends.cluster.pipelines import handler
from tests.standins import kfp_argo

IR = {"pipelineInfo": {"name": "classifiers"}, "root": {"dag": {"tasks": {
    "load-data": {"componentRef": {"name": "comp-load"},
                  "cachingOptions": {"enableCache": True}},
    "train-tree": {"componentRef": {"name": "comp-train"}, "dependentTasks": ["load-data"],
                   "cachingOptions": {"enableCache": True}}}}}}


def _run(run_id: str = "rid-1", state: str = "SUCCEEDED", *, ir: dict | None = None,
         cache_exec: int = 0) -> dict[str, Any]:
    """A v2beta1 Run as KFP 2.16 returns it after the persistence agent's last report."""
    wf = kfp_argo.build_workflow(run_id, IR, {
        "load-data": {"phase": "Succeeded", "started": 100, "finished": 110},
        "train-tree": {"phase": "Succeeded", "started": 111, "finished": 120}}, 99, 121)
    rows = kfp_argo.store_tasks(kfp_argo.model_tasks(wf), {}, 130)
    if cache_exec:
        rows.append(kfp_argo.cache_row(run_id, "classifiers", "", cache_exec, "fp", 100, 110))
    run = {"run_id": run_id, "display_name": "first-run", "state": state,
           "created_at": "2026-01-01T00:00:00Z",
           "run_details": {"task_details": [kfp_argo.api_task_detail(t) for t in rows]}}
    if ir is not None:
        run["pipeline_spec"] = ir
    return run


class FakeBackend:
    """The few attributes the pipelines handler uses, with its port-forwards pre-filled
    (the stand-in servers listen on 127.0.0.1 already)."""

    def __init__(self, root: Path, forwards: dict[tuple[str, int], str]) -> None:
        self.root = root
        self.events: list[dict[str, Any]] = []
        self.said: list[str] = []
        self._forwards = forwards

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def say(self, text: str) -> None:
        self.said.append(text)


@pytest.mark.parametrize("with_ir", [True, False])
def test_the_task_list_is_the_pipeline_steps(with_ir: bool) -> None:
    run = _run(ir=IR if with_ir else None, cache_exec=7)
    assert len(run["run_details"]["task_details"]) == 10  # 9 Argo nodes + a cache row
    assert sorted(t["display_name"] for t in handler.pipeline_tasks(run)) == [
        "load-data", "train-tree"]


def test_progress_names_steps_never_executor(tmp_path: Path) -> None:
    backend = FakeBackend(tmp_path, {})

    class Kfp:
        def get_run(self, _run_id: str) -> dict[str, Any]:
            return _run(ir=IR, cache_exec=7)

    handler._follow(backend, Kfp(), "rid-1", "first-run")
    tasks = [e["task"] for e in backend.events if e["event"].startswith("task-")]
    assert sorted(tasks) == ["load-data", "train-tree"], backend.events


@pytest.fixture
def mlmd_and_store() -> Any:
    from tests.standins.kfp import Mlmd, ObjectStore

    mlmd, store = Mlmd(), ObjectStore()
    mlmd.start()
    store.start()
    yield mlmd, store
    mlmd.stop()
    store.stop()


def test_outputs_come_from_the_runs_mlmd_context(tmp_path: Path, mlmd_and_store: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    mlmd, store = mlmd_and_store
    model = tmp_path / "model.joblib"
    model.write_bytes(b"tree")
    root = mlmd.record_root("rid-1", "classifiers")
    mlmd.record({"name": "load-data", "state": "SUCCEEDED", "parameters": {"rows": 150},
                 "artifacts": {}}, "rid-1", "classifiers", pod="p1", parent=root,
                fingerprint="f1")
    _, arts = mlmd.record(
        {"name": "train-tree", "state": "SUCCEEDED", "parameters": {},
         "artifacts": {"metrics": {"type": "system.Metrics", "path": "",
                                   "metadata": {"accuracy": 0.93}},
                       "model": {"type": "system.Model", "path": str(model),
                                 "metadata": {"framework": "sklearn"}}}},
        "rid-1", "classifiers", pod="p2", parent=root, fingerprint="f2")
    store.objects[mlmd.artifacts[arts["model"]].uri.removeprefix("minio://")] = b"tree"
    # another run's execution of the same task name must not leak in
    mlmd.record({"name": "train-tree", "state": "SUCCEEDED", "parameters": {"x": 1},
                 "artifacts": {}}, "rid-2", "classifiers", pod="p3",
                parent=mlmd.record_root("rid-2", "classifiers"), fingerprint="")
    backend = FakeBackend(tmp_path / "state", {
        (handler.MLMD_SERVICE, handler.MLMD_PORT): f"http://127.0.0.1:{mlmd.port}",
        (handler.STORE_SERVICE, handler.STORE_PORT): f"http://127.0.0.1:{store.port}"})
    monkeypatch.setattr(handler, "_store_credentials", lambda _b: (store.access, store.secret))
    obj = handler.shape(backend, _run(ir=IR), "lab")
    assert [t["display_name"] for t in shapes.tasks(obj)] == ["load-data", "train-tree"]
    assert shapes.task(obj, "load-data")["outputs"]["parameters"] == {"rows": 150}
    tree = shapes.task(obj, "train-tree")["outputs"]
    assert tree["parameters"] == {}
    assert tree["metrics"]["accuracy"] == pytest.approx(0.93)
    art = shapes.artifact(obj, "train-tree", "model")
    assert art["type"] == "system.Model" and art["metadata"]["framework"] == "sklearn"
    assert Path(art["path"]).read_bytes() == b"tree"


def test_artifact_metadata_lists_and_objects_read_as_written(
        tmp_path: Path, mlmd_and_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """KFP 2.16.0's launcher wraps an artifact's list metadata as {"list": [...]} and object
    metadata as {"struct": {...}} in MLMD (converter.go:153-166); the stand-in stores exactly
    that shape and kflab unwraps it, so the cluster's metadata reads as the local backend's
    (booleans 0/1 and numbers as floats: all MLMD keeps). Before: {"struct"...} and
    {"list": ...} reached the learner, and the stand-in stored objects unwrapped."""
    mlmd, store = mlmd_and_store
    root = mlmd.record_root("rid-m", "meta")
    meta = {"classes": ["benign", "malignant"], "params": {"depth": 3, "crit": "gini"},
            "n": 3, "ok": True, "name": "tree"}
    _, arts = mlmd.record(
        {"name": "train-tree", "state": "SUCCEEDED", "parameters": {},
         "artifacts": {"model": {"type": "system.Model", "path": "", "metadata": meta}}},
        "rid-m", "meta", pod="p1", parent=root, fingerprint="")
    stored = mlmd.artifacts[arts["model"]].custom_properties
    from google.protobuf.json_format import MessageToDict

    assert MessageToDict(stored["classes"].struct_value) == {"list": ["benign", "malignant"]}
    assert MessageToDict(stored["params"].struct_value) == {
        "struct": {"depth": 3.0, "crit": "gini"}}
    assert stored["ok"].int_value == 1 and stored["n"].double_value == 3.0
    backend = FakeBackend(tmp_path / "state", {
        (handler.MLMD_SERVICE, handler.MLMD_PORT): f"http://127.0.0.1:{mlmd.port}",
        (handler.STORE_SERVICE, handler.STORE_PORT): f"http://127.0.0.1:{store.port}"})
    monkeypatch.setattr(handler, "_store_credentials", lambda _b: (store.access, store.secret))
    obj = handler.shape(backend, _run("rid-m", ir=IR), "lab")
    got = shapes.artifact(obj, "train-tree", "model")["metadata"]
    assert got["classes"] == ["benign", "malignant"]
    assert got["params"] == {"depth": 3.0, "crit": "gini"}
    assert (got["n"], got["ok"], got["name"]) == (3.0, 1, "tree")


def test_a_run_with_no_mlmd_context_has_no_outputs(tmp_path: Path,
                                                   mlmd_and_store: Any) -> None:
    mlmd, _ = mlmd_and_store
    backend = FakeBackend(tmp_path, {
        (handler.MLMD_SERVICE, handler.MLMD_PORT): f"http://127.0.0.1:{mlmd.port}"})
    started = time.monotonic()
    obj = handler.shape(backend, _run("rid-none", ir=IR), "lab")
    assert all(t["outputs"] is None for t in shapes.tasks(obj))
    assert time.monotonic() - started < 10


def test_a_tasks_pod_is_found_by_its_argo_node() -> None:
    run = _run(ir=IR)
    task = next(t for t in handler.pipeline_tasks(run) if t["display_name"] == "train-tree")
    [node] = [c["pod_name"] for c in task["child_tasks"]]
    wf, _, digest = node.rpartition("-")
    pod = f"{wf}-system-container-impl-{digest}"
    annotated = {"metadata": {"name": pod, "annotations": {
        handler.NODE_ID_ANNOTATION: node}}}
    other = {"metadata": {"name": f"{wf}-system-container-driver-1", "annotations": {
        handler.NODE_ID_ANNOTATION: f"{wf}-1"}}}
    assert handler._pod_of(annotated, {node}) and not handler._pod_of(other, {node})
    # without Argo's annotation: the v2 pod name carries the node id's hash
    assert handler._pod_of({"metadata": {"name": pod}}, {node})
    assert not handler._pod_of({"metadata": {"name": f"{wf}-system-container-impl-9"}},
                               {node})
