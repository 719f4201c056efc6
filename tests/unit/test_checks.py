"""Each check type fails on missing/wrong state and passes on the upstream status shape.

Objects are written to the local store directly, playing the controller's part."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.kube.conditions import set_condition
from lab.scenarios import checks
from lab.scenarios.compare import compare
from lab.scenarios.context import Context
from lab.scenarios.model import Check


def chk(ctype: str, timeout: float = 0, **params) -> Check:
    return Check(ctype, "msg", timeout, params, "test:1")


@pytest.fixture
def ctx(state: Path, tmp_path: Path) -> Context:
    return Context(LocalBackend(str(state)), tmp_path)


def put_experiment(ctx: Context, succeeded: bool) -> None:
    status: dict = {"trials": 4}
    set_condition(status, "Created", True, "ExperimentCreated")
    if succeeded:
        set_condition(status, "Succeeded", True, "ExperimentMaxTrialsReached")
    ctx.backend.store.put({"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
                           "metadata": {"name": "e"}, "spec": {}, "status": status})


def test_condition(ctx: Context) -> None:
    c = chk("condition", kind="Experiment", name="e", condition="Succeeded")
    assert not checks.evaluate(c, ctx).ok  # missing resource
    put_experiment(ctx, succeeded=False)
    out = checks.evaluate(c, ctx)
    # no kflab process owns it, so reading it marks it Failed, and the check says so
    assert not out.ok and out.observed.startswith("Failed (ExperimentFailed): "), out.observed
    put_experiment(ctx, succeeded=True)
    assert checks.evaluate(c, ctx).ok


def test_condition_on_a_failed_resource_says_why(ctx: Context) -> None:
    """A Failed resource never gets Succeeded: the check shows the reason, not "yet"."""
    status: dict = {}
    set_condition(status, "Created", True, "PyTorchJobCreated")
    set_condition(status, "Failed", True, "PyTorchJobFailed",
                  "PyTorchJob p is failed because 1 Worker replica(s) failed.")
    ctx.backend.store.put({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                           "metadata": {"name": "p"}, "spec": {}, "status": status})
    out = checks.evaluate(chk("condition", kind="PyTorchJob", name="p", condition="Succeeded"),
                          ctx)
    assert not out.ok
    assert out.observed == ("Failed (PyTorchJobFailed): PyTorchJob p is failed because 1 "
                            "Worker replica(s) failed.")
    assert checks.evaluate(chk("condition", kind="PyTorchJob", name="p", condition="Failed"),
                           ctx).ok


def test_field_query_and_list(ctx: Context) -> None:
    put_experiment(ctx, succeeded=True)
    assert checks.evaluate(chk("field", kind="exp", name="e", query="status.trials", op=">=",
                               value=4), ctx).ok
    assert not checks.evaluate(chk("field", kind="exp", name="e", query="status.trials",
                                   op=">", value=4), ctx).ok
    assert checks.evaluate(chk("field", kind="experiments", query="length(items)", value=1),
                           ctx).ok


def test_a_metric_query_names_the_task_that_logged_another_name(ctx: Context) -> None:
    """pipeline-classifiers counts `accuracy` metrics: a trainer that logged `acc` is named."""
    tasks = [{"display_name": f"train-{m}", "outputs": {"metrics": {"accuracy": 0.9}}}
             for m in ("tree", "lr", "nb", "xgb")]
    tasks.append({"display_name": "train-svm", "outputs": {"metrics": {"acc": 0.95}}})
    tasks.append({"display_name": "load-data", "outputs": {}})
    ctx.backend.store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                           "metadata": {"name": "five"},
                           "status": {"state": "SUCCEEDED", "run_details": {
                               "task_details": tasks}}})
    out = checks.evaluate(chk("field", kind="PipelineRun", name="five", op=">=", value=5,
                              query="length(status.run_details.task_details[]"
                                    ".outputs.metrics.accuracy)"), ctx)
    assert not out.ok
    assert out.observed.endswith("= 4; not 'accuracy': train-svm logged acc"), out.observed


def test_a_metric_query_of_one_task_names_that_task_only(ctx: Context) -> None:
    """pipeline-classifiers step 3 reads compare-models' best_accuracy: a learner who logged
    best_acc is told about compare-models, not about the trainers' accuracy metrics."""
    tasks = [{"display_name": f"train-{m}", "outputs": {"metrics": {"accuracy": 0.9}}}
             for m in ("tree", "svm")]
    tasks.append({"display_name": "compare-models",
                  "outputs": {"metrics": {"best_acc": 0.97, "tree": 0.9}}})
    ctx.backend.store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                           "metadata": {"name": "classifiers"},
                           "status": {"state": "SUCCEEDED", "run_details": {
                               "task_details": tasks}}})
    query = ("status.run_details.task_details[?display_name=='compare-models'] | [0]"
             ".outputs.metrics.best_accuracy")
    out = checks.evaluate(chk("field", kind="PipelineRun", name="classifiers", op=">=",
                              value=0.93, query=query), ctx)
    assert not out.ok
    assert out.observed.endswith("= None; not 'best_accuracy': compare-models logged "
                                 "best_acc, tree"), out.observed


def test_pipeline_run_state_and_artifact(ctx: Context, tmp_path: Path) -> None:
    c = chk("pipeline-run", name="r", artifact={"task": "t", "name": "model"})
    assert "no pipeline run" in checks.evaluate(c, ctx).observed
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(b"x")
    run = {"apiVersion": "kflab.dev/v1", "kind": "PipelineRun", "metadata": {"name": "r"},
           "status": {"state": "SUCCEEDED", "run_details": {"task_details": [
               {"display_name": "t", "outputs": {"artifacts": {"model": {"path": str(outside)}}}}
           ]}}}
    ctx.backend.store.put(run)
    # a record naming a file outside the state folder (edited by hand) never counts
    assert "outside the state folder" in checks.evaluate(c, ctx).observed
    model = ctx.backend.root / "runs" / "r" / "model.bin"
    model.parent.mkdir(parents=True, exist_ok=True)
    run["status"]["run_details"]["task_details"][0]["outputs"]["artifacts"]["model"]["path"] = \
        str(model)
    ctx.backend.store.put(run)
    assert "missing or empty" in checks.evaluate(c, ctx).observed
    model.write_bytes(b"x")
    assert checks.evaluate(c, ctx).ok
    run["status"]["state"] = "FAILED"
    run["status"]["error"] = {"message": "boom"}
    ctx.backend.store.put(run)
    out = checks.evaluate(c, ctx)
    assert not out.ok and "FAILED: boom" in out.observed


def test_file_exists(ctx: Context) -> None:
    c = chk("file-exists", path="out.txt", contains="hello")
    assert not checks.evaluate(c, ctx).ok
    (ctx.workdir / "out.txt").write_text("")
    assert "empty" in checks.evaluate(c, ctx).observed
    (ctx.workdir / "out.txt").write_text("bye")
    assert "does not contain" in checks.evaluate(c, ctx).observed
    (ctx.workdir / "out.txt").write_text("hello world")
    assert checks.evaluate(c, ctx).ok


def test_command_uses_argv_not_a_shell(ctx: Context) -> None:
    # A shell would expand $HOME and run the `; exit 3`: argv passes them literally.
    argv = [sys.executable, "-c", "import sys; print(sys.argv[1])", "$HOME; exit 3"]
    assert checks.evaluate(chk("command", argv=argv, stdout=r"^\$HOME; exit 3$"), ctx).ok
    out = checks.evaluate(chk("command", argv=[sys.executable, "-c", "raise SystemExit(2)"]), ctx)
    assert not out.ok and "exit code 2" in out.observed
    assert "not found" in checks.evaluate(chk("command", argv=["no-such-cmd-kflab"]), ctx).observed


def test_a_failing_command_shows_a_tracebacks_error_not_its_frames(ctx: Context) -> None:
    out = checks.evaluate(chk("command", argv=[sys.executable, "-c",
                                               "import no_such_module_kflab"]), ctx)
    assert out.observed == ("exit code 1 (want 0): ModuleNotFoundError: No module named "
                            "'no_such_module_kflab'")
    out = checks.evaluate(chk("command", argv=[sys.executable, "-c",
                                               "print('a'); print('b'); print('c'); "
                                               "print('d'); raise SystemExit(3)"]), ctx)
    assert out.observed == "exit code 3 (want 0): b | c | d"  # plain output: its last lines


def test_timeout_polls_until_true_while_something_runs(ctx: Context) -> None:
    """A pipeline run in progress (its kflab owner holds the lock, as `kflab pipeline run`
    does) may still write the file: the check waits for it."""
    import threading

    from lab.backends.local import owners

    target = ctx.workdir / "late.txt"
    assert not checks.evaluate(chk("file-exists", path="late.txt"), ctx, wait=False).ok
    with owners.acquire(ctx.backend.root, "PipelineRun", "default", "r"):
        assert ctx.backend.in_progress() == ["PipelineRun/default/r"]
        threading.Timer(0.6, lambda: target.write_text("x")).start()
        assert checks.evaluate(chk("file-exists", timeout=5, path="late.txt"), ctx).ok
        t0 = time.monotonic()
        out = checks.evaluate(chk("file-exists", timeout=1, path="never.txt"), ctx)
        assert not out.ok and time.monotonic() - t0 >= 0.9  # waited its whole timeout


def test_checks_fail_fast_when_nothing_can_change(ctx: Context) -> None:
    """Nothing runs: a missing file, a missing resource, a command that fails stay so until
    the learner acts, so the check answers at once instead of waiting out its timeout."""
    assert ctx.backend.in_progress() == []
    t0 = time.monotonic()
    for c in (chk("file-exists", timeout=30, path="metrics.json"),
              chk("json-file", timeout=30, path="metrics.json", query="a", value=1),
              chk("pipeline-run", timeout=30, name="first-run"),
              chk("condition", timeout=30, kind="Experiment", name="e", condition="Succeeded"),
              chk("command", timeout=30, argv=[sys.executable, "-c", "raise SystemExit(1)"])):
        assert not checks.evaluate(c, ctx).ok
    assert time.monotonic() - t0 < 5


def test_a_cluster_backend_still_waits() -> None:
    """A backend that cannot say what runs (a cluster, whose controllers act on their own)
    never counts as settled."""
    assert not checks.settled(Context(object(), Path(".")))  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "op", "expected", "ok"), [
    (0.95, ">=", 0.9, True), (0.85, ">=", 0.9, False), ("0.95", ">=", 0.9, False),
    (None, ">=", 1, False), ([1, 2], "contains", 2, True), ("abc", "matches", "b.", True),
    (None, "exists", True, False), (3, "exists", None, True), (0.5, "approx", [0.52, 0.05], True),
    ([1, 2, 3], "length>=", 3, True), (True, ">=", 1, False),
])
def test_compare(value, op, expected, ok) -> None:
    assert compare(value, op, expected) is ok


def test_a_model_server_still_starting_keeps_checks_waiting(ctx: Context) -> None:
    """A model server process runs but its InferenceService is not Ready yet (the model is
    loading): something may still change, so checks wait; once it has failed, they need
    not. (A sleeping process stands in for the server: what matters here is that it runs.)"""
    backend = ctx.backend
    backend.store.put({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                       "metadata": {"name": "iris", "namespace": "default"},
                       "spec": {}, "status": {"modelStatus": {"transitionStatus": "InProgress"}}})
    from lab.backends.local.serving.handler import proc_id

    rec = backend.procs.spawn(proc_id("default", "iris"),
                              [sys.executable, "-c", "import time; time.sleep(30)"],
                              owner="InferenceService/default/iris",
                              log=backend.root / "iris.log")
    try:
        assert backend.in_progress() == ["InferenceService/default/iris"]
        assert not checks.settled(ctx)
    finally:
        backend.procs.stop(rec.id, grace=1)
    assert backend.in_progress() == []
