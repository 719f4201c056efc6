"""The KFP v2beta1 API of `kflab ui` on the local backend, driven by the real kfp SDK client
(kfp.Client), every exchange checked against the KFP 2.16 swagger
(../shared/upstream/kfp-api-2.16.0; the schema checks skip when it is absent).

One server and one tiny one-component run per module; nothing is mocked. (No
`from __future__ import annotations` here: kfp reads the component's annotations.)"""


import copy
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")

from kfp import compiler, dsl  # noqa: E402

from lab.backends.local import LocalBackend  # noqa: E402
from lab.webui.server import UiServer  # noqa: E402
from tests.conftest import need_upstream, run_kflab  # noqa: E402

SWAGGER_PARTS = ("kfp-api-2.16.0", "v2beta1", "swagger", "kfp_api_single_file.swagger.json")


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="tiny-add")
def tiny(a: int = 1, b: int = 2) -> int:
    return add(a=a, b=b).output


@dsl.component
def fail(why: str) -> None:
    raise RuntimeError(why)


@dsl.pipeline(name="tiny-fail")
def failing(why: str = "diverged") -> None:
    fail(why=why)


@dsl.component
def nap(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@dsl.pipeline(name="tiny-nap")
def napping(seconds: float = 60.0) -> float:
    return nap(seconds=seconds).output


def by_key(key: str, value: str, op: int = 1) -> str:
    """A filter as kfp.Client's docs write it (operation numbers: client.py
    _FILTER_OPERATIONS)."""
    return json.dumps({"predicates": [{"operation": op, "key": key, "stringValue": value}]})


def wait_state(client: Any, run_id: str, states: set[str], timeout: float = 120) -> Any:
    """get_run until the run is in one of `states` (wait_for_run_completion does not stop
    at CANCELED: its finish states are succeeded, failed, skipped and error)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = client.get_run(run_id)
        if run.state in states:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} is {run.state}, not in {states}")


def _strict(defs: dict[str, Any]) -> dict[str, Any]:
    """The swagger's definitions with unknown fields refused: a response carrying a field
    KFP's API does not define fails, as the generated client would silently drop it."""
    out = copy.deepcopy(defs)
    for name, d in out.items():
        # protobufAny's JSON form carries the packed message's own fields beside "@type"
        # (the google.rpc.Status of an error's details): not closed
        if "properties" in d and "additionalProperties" not in d and name != "protobufAny":
            d["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def schema() -> Any:
    import jsonschema

    doc = json.loads(need_upstream(*SWAGGER_PARTS).read_text())
    defs = _strict(doc["definitions"])
    # what a client sends: protojson reads an int64 given as a number too (the generated
    # client sends max_concurrency=1); the server's answers must use the string form
    sent_defs = copy.deepcopy(defs)
    for d in sent_defs.values():
        for prop in (d.get("properties") or {}).values():
            if prop.get("format") == "int64" and prop.get("type") == "string":
                prop["type"] = ["string", "integer"]

    validators: dict[tuple[str, bool], Any] = {}

    def check(ref: str, data: Any, sent: bool = False) -> None:
        if (ref, sent) not in validators:
            validators[ref, sent] = jsonschema.Draft4Validator(
                {"$ref": f"#/definitions/{ref}",
                 "definitions": sent_defs if sent else defs})
        validators[ref, sent].validate(data)
    check.paths = doc["paths"]  # type: ignore[attr-defined]
    return check


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("state")
    exchanges: list[tuple[str, str, int, Any, Any]] = []
    ui = UiServer(LocalBackend(str(root)), root)
    handle = ui.api.handle

    def recording(method: str, path: str, query: dict, ctype: str, body: bytes) -> Any:
        status, out = handle(method, path, query, ctype, body)
        sent = json.loads(body) if body and ctype.startswith("application/json") else None
        exchanges.append((method, path, status, sent, out))
        return status, out

    ui.api.handle = recording  # type: ignore[method-assign]
    ui.start()
    ui.exchanges = exchanges  # type: ignore[attr-defined]
    yield ui
    ui.stop()


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    return kfp.Client(host=server.host)


@pytest.fixture(scope="module")
def finished(client: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One run from an uploaded pipeline version, waited for as a learner does."""
    package = tmp_path_factory.mktemp("pkg") / "tiny.yaml"
    compiler.Compiler().compile(tiny, str(package))
    pipeline = client.upload_pipeline(str(package), pipeline_name="tiny-add")
    versions = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    exp = client.create_experiment("lab-exp")
    run = client.run_pipeline(experiment_id=exp.experiment_id, job_name="tiny from version",
                              pipeline_id=pipeline.pipeline_id,
                              version_id=versions[0].pipeline_version_id,
                              params={"a": 5, "b": 7})
    done = client.wait_for_run_completion(run.run_id, timeout=120, sleep_duration=1)
    return pipeline, exp, done


def test_health_and_experiments(client: Any) -> None:
    assert client.get_kfp_healthz().multi_user is False
    exp = client.create_experiment("first", description="d")
    again = client.create_experiment("first")  # by name: the same one, as on a cluster
    assert again.experiment_id == exp.experiment_id
    assert client.get_experiment(experiment_name="first").experiment_id == exp.experiment_id
    assert client.get_experiment(experiment_id=exp.experiment_id).display_name == "first"
    names = [e.display_name for e in client.list_experiments().experiments]
    assert "first" in names


def test_run_from_uploaded_version(client: Any, finished: Any, server: Any) -> None:
    pipeline, exp, done = finished
    assert done.state == "SUCCEEDED", done.error
    assert done.experiment_id == exp.experiment_id
    assert done.pipeline_version_reference.pipeline_id == pipeline.pipeline_id
    tasks = done.run_details.task_details
    assert [t.display_name for t in tasks] == ["add"]
    assert tasks[0].state == "SUCCEEDED" and tasks[0].end_time is not None
    got = client.get_run(done.run_id)
    assert got.display_name == "tiny from version"
    listed = client.list_runs(experiment_id=exp.experiment_id).runs
    assert [r.run_id for r in listed] == [done.run_id]
    # the same record `kflab get runs` reads, with the engine's own output
    rec = server.backend.get("PipelineRun", server.api.run_name(done.run_id))
    assert rec["status"]["run_details"]["task_details"][0]["outputs"]["parameters"] == \
        {"Output": 12}
    table = run_kflab("--state", str(server.api.root), "get", "runs")
    assert table.returncode == 0, table.stderr
    assert rec["metadata"]["name"] in table.stdout and "SUCCEEDED" in table.stdout


def test_run_from_pipeline_func_is_cached(client: Any, finished: Any) -> None:
    """create_run_from_pipeline_func sends the spec inline; the same inputs as the first run
    come from KFP's cache (SKIPPED, as the API reports a cached task)."""
    result = client.create_run_from_pipeline_func(tiny, arguments={"a": 5, "b": 7},
                                                  experiment_name="lab-exp")
    done = client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=1)
    assert done.state == "SUCCEEDED", done.error
    assert done.pipeline_spec["pipelineInfo"]["name"] == "tiny-add"
    assert [t.state for t in done.run_details.task_details] == ["SKIPPED"]


@pytest.fixture(scope="module")
def failed(client: Any) -> Any:
    result = client.create_run_from_pipeline_func(failing, arguments={"why": "loss is nan"})
    return client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=1)


def test_a_failed_run_says_why(client: Any, failed: Any) -> None:
    """A task that raises: the run is FAILED with the engine's message naming the task, and
    the task is FAILED."""
    done = failed
    assert done.state == "FAILED"
    assert "'fail'" in done.error.message
    assert [(t.display_name, t.state) for t in done.run_details.task_details] == \
        [("fail", "FAILED")]
    assert client.get_experiment(experiment_name="Default").experiment_id == \
        done.experiment_id  # no experiment named: KFP's "Default"


def test_bad_requests_are_refused(client: Any, server: Any) -> None:
    req = urllib.request.Request(f"{server.host}/apis/v2beta1/runs", method="POST",
                                 data=b'{"display_name": "x", "pipeline_spec": {"a": 1}}',
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    body = json.loads(err.value.read())
    assert err.value.code == 400 and "no 'root'" in body["message"]
    with pytest.raises(kfp_server_api_exception()):
        client.get_run("no-such-run")
    foreign = urllib.request.Request(f"{server.host}/apis/v2beta1/healthz",
                                     headers={"Origin": "http://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(foreign)
    assert err.value.code == 403


def kfp_server_api_exception() -> type[Exception]:
    import kfp_server_api

    return kfp_server_api.ApiException


def test_get_pipeline_id_and_versions_by_pipeline_name(client: Any, finished: Any,
                                                       tmp_path: Path) -> None:
    """Issue 36: get_pipeline_id("no-such-name") returned an existing id, and with two
    pipelines raised "Multiple pipelines"; upload_pipeline_version(pipeline_name=...) went
    to the wrong pipeline."""
    pipeline, _, _ = finished
    package = tmp_path / "fail.yaml"
    compiler.Compiler().compile(failing, str(package))
    other = client.upload_pipeline(str(package), pipeline_name="tiny-fail")
    assert client.get_pipeline_id("no-such-name") is None
    assert client.get_pipeline_id("tiny-add") == pipeline.pipeline_id
    assert client.get_pipeline_id("tiny-fail") == other.pipeline_id
    version = client.upload_pipeline_version(str(package), "v2", pipeline_name="tiny-fail")
    assert version.pipeline_id == other.pipeline_id
    with pytest.raises(kfp_server_api_exception()) as err:
        client.upload_pipeline_version(str(package), "v3", pipeline_name="no-such-name")
    assert err.value.status == 400
    names = [p.display_name for p in client.list_pipelines(sort_by="display_name desc")
             .pipelines]
    assert names == ["tiny-fail", "tiny-add"]
    # delete_pipeline refuses while versions exist (resource_manager.go DeletePipeline)
    with pytest.raises(kfp_server_api_exception()) as err:
        client.delete_pipeline(other.pipeline_id)
    assert err.value.status == 400 and "existing pipeline versions" in err.value.body
    for v in client.list_pipeline_versions(other.pipeline_id).pipeline_versions:
        client.delete_pipeline_version(other.pipeline_id, v.pipeline_version_id)
    client.delete_pipeline(other.pipeline_id)
    assert client.get_pipeline_id("tiny-fail") is None
    by_name = client.pipelines.pipeline_service_get_pipeline_by_name(name="tiny-add")
    assert by_name.pipeline_id == pipeline.pipeline_id


def test_list_runs_filters_sorts_and_pages(client: Any, finished: Any, failed: Any) -> None:
    """Issue 36: list_runs ignored filter, page_size and sort_by."""
    _, exp, done = finished
    everything = client.list_runs(page_size=100)
    assert everything.total_size >= 3 and not everything.next_page_token
    one = client.list_runs(filter=by_key("display_name", "tiny from version")).runs
    assert [r.run_id for r in one] == [done.run_id]
    newest = client.list_runs(page_size=1, sort_by="created_at desc")
    oldest = client.list_runs(page_size=1, sort_by="created_at")
    assert newest.runs[0].created_at >= oldest.runs[0].created_at
    assert newest.next_page_token and newest.total_size == everything.total_size
    seen, token = [], ""
    while True:
        page = client.list_runs(page_size=1, page_token=token, sort_by="" if token else
                                "created_at desc")
        seen += [r.run_id for r in page.runs]
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == everything.total_size == len(set(seen))
    failed_ones = client.list_runs(filter=by_key("state", "FAILED")).runs
    assert failed.run_id in [r.run_id for r in failed_ones]
    assert all(r.state == "FAILED" for r in failed_ones)
    tiny = client.list_runs(filter=by_key("display_name", "tiny", op=9)).runs  # IS_SUBSTRING
    assert done.run_id in [r.run_id for r in tiny]
    assert [r.run_id for r in client.list_runs(experiment_id=exp.experiment_id,
                                               filter=by_key("state", "SUCCEEDED")).runs] \
        == [r.run_id for r in client.list_runs(experiment_id=exp.experiment_id).runs
            if r.state == "SUCCEEDED"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"filter": "{not json"}, "failed to parse valid filter from"),
    ({"filter": by_key("colour", "red")}, 'no support for filtering on unrecognized field '
                                          '\\"colour\\"'),
    ({"filter": json.dumps({"predicates": [{"operation": 42, "key": "state",
                                            "stringValue": "x"}]})},
     "Error using Filter.Predicate.Operation"),
    ({"page_token": "not-a-token"}, "Invalid package token"),
    ({"sort_by": "colour"}, "Invalid sorting field"),
])
def test_bad_list_requests_get_kfps_400(client: Any, kwargs: dict[str, Any],
                                        message: str) -> None:
    with pytest.raises(kfp_server_api_exception()) as err:
        client.list_runs(**kwargs)
    assert err.value.status == 400 and message in err.value.body, err.value.body


def test_archive_unarchive_and_delete(client: Any, finished: Any) -> None:
    """resource_manager.go ArchiveRun / UnarchiveRun (not while the experiment is archived),
    ArchiveExperiment (its runs too), DeleteRun, DeleteExperiment."""
    pipeline, _, _ = finished
    exp = client.create_experiment("to-archive")
    versions = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    run = client.run_pipeline(experiment_id=exp.experiment_id, job_name="archive me",
                              pipeline_id=pipeline.pipeline_id,
                              version_id=versions[0].pipeline_version_id, params={"a": 5, "b": 7})
    client.wait_for_run_completion(run.run_id, timeout=120, sleep_duration=1)
    client.archive_run(run.run_id)
    client.archive_run(run.run_id)  # twice: no error, as in KFP
    assert client.get_run(run.run_id).storage_state == "ARCHIVED"
    shown = client.list_runs(filter=json.dumps({"predicates": [
        {"operation": "NOT_EQUALS", "key": "storage_state", "stringValue": "ARCHIVED"}]}))
    assert run.run_id not in [r.run_id for r in shown.runs]  # what the KFP UI lists
    client.unarchive_run(run.run_id)
    client.archive_experiment(exp.experiment_id)
    assert client.get_experiment(experiment_id=exp.experiment_id).storage_state == "ARCHIVED"
    assert client.get_run(run.run_id).storage_state == "ARCHIVED"
    with pytest.raises(kfp_server_api_exception()) as err:
        client.unarchive_run(run.run_id)
    assert err.value.status == 400 and "must be un-archived first" in err.value.body
    client.unarchive_experiment(exp.experiment_id)
    client.unarchive_run(run.run_id)
    assert client.get_run(run.run_id).storage_state == "AVAILABLE"
    client.delete_run(run.run_id)
    with pytest.raises(kfp_server_api_exception()) as err:
        client.get_run(run.run_id)
    assert err.value.status == 404
    client.delete_experiment(exp.experiment_id)
    with pytest.raises(kfp_server_api_exception()):
        client.get_experiment(experiment_id=exp.experiment_id)


def test_terminate_then_retry(client: Any, failed: Any) -> None:
    """terminate_run: the run and its task end CANCELED (the engine's record); terminating a
    finished run is refused (run_store.go TerminateRun); retry_run runs a failed run again
    (resource_manager.go RetryRun), refused for one that succeeded."""
    long = client.create_run_from_pipeline_func(napping, arguments={"seconds": 120.0},
                                                run_name="long nap")
    wait_state(client, long.run_id, {"RUNNING"})
    client.terminate_run(long.run_id)
    stopped = wait_state(client, long.run_id, {"CANCELED", "FAILED", "SUCCEEDED"})
    assert stopped.state == "CANCELED", stopped.error
    assert "KFP API (terminate_run)" in stopped.error.message
    assert [s.state for s in stopped.state_history][-1] == "CANCELED"
    with pytest.raises(kfp_server_api_exception()) as err:
        client.terminate_run(long.run_id)
    assert err.value.status == 400 and "Row not found" in err.value.body
    client.runs.run_service_retry_run(run_id=failed.run_id)
    again = client.wait_for_run_completion(failed.run_id, timeout=120, sleep_duration=1)
    assert again.state == "FAILED" and again.run_id == failed.run_id
    assert again.finished_at > failed.finished_at  # it ran again
    done = client.list_runs(filter=by_key("state", "SUCCEEDED")).runs[0]
    with pytest.raises(kfp_server_api_exception()) as err:
        client.runs.run_service_retry_run(run_id=done.run_id)
    assert err.value.status == 409 and "Workflow must be Failed/Error to retry" in \
        err.value.body


def test_recurring_run_triggers_with_max_concurrency(client: Any, tmp_path: Path) -> None:
    """create_recurring_run(interval_second=1, max_concurrency=1) of a 3-second pipeline:
    runs are started by the server's scheduler, never two at once; disabling stops them
    (the ScheduledWorkflow controller's rules, kfp_recurring.py)."""
    import time

    package = tmp_path / "nap.yaml"
    compiler.Compiler().compile(napping, str(package))
    exp = client.create_experiment("recurring")
    job = client.create_recurring_run(experiment_id=exp.experiment_id, job_name="every second",
                                      interval_second=1, max_concurrency=1,
                                      pipeline_package_path=str(package),
                                      params={"seconds": 3.0})
    assert job.status == "ENABLED" and job.trigger.periodic_schedule.interval_second == "1"
    mine = by_key("recurring_run_id", job.recurring_run_id)
    most_active, end = 0, time.monotonic() + 90
    while time.monotonic() < end:
        runs = client.list_runs(filter=mine).runs or []
        most_active = max(most_active, sum(r.state in ("PENDING", "RUNNING") for r in runs))
        if sum(r.state == "SUCCEEDED" for r in runs) >= 2:
            break
        time.sleep(0.3)
    assert sum(r.state == "SUCCEEDED" for r in runs) >= 2, [(r.display_name, r.state)
                                                           for r in runs]
    assert most_active == 1
    assert all(r.experiment_id == exp.experiment_id and
               r.display_name.startswith(f"everysecond{job.recurring_run_id[:5]}")
               for r in runs)
    client.disable_recurring_run(job.recurring_run_id)
    assert client.get_recurring_run(job.recurring_run_id).status == "DISABLED"
    time.sleep(1.5)  # a run triggered just before the disable may still start
    count = len(client.list_runs(filter=mine).runs)
    time.sleep(3)
    assert len(client.list_runs(filter=mine).runs) == count
    assert [r.recurring_run_id for r in client.list_recurring_runs(
        experiment_id=exp.experiment_id).recurring_runs] == [job.recurring_run_id]
    client.enable_recurring_run(job.recurring_run_id)
    client.disable_recurring_run(job.recurring_run_id)
    client.delete_recurring_run(job.recurring_run_id)
    assert client.list_recurring_runs(experiment_id=exp.experiment_id).recurring_runs is None


def test_the_links_kfp_client_prints_resolve_in_the_ui(client: Any, finished: Any,
                                                      server: Any, tmp_path: Path) -> None:
    """kfp.Client prints KFP UI links (#/runs/details/ID, #/experiments/details/ID,
    #/pipelines/details/ID); in `kflab ui` they open the run's page, the experiment's runs
    and the pipeline's versions (headless Chromium; skipped without it)."""
    import shutil

    from tests.integration.test_webui_browser import chromium, static_copy

    pipeline, exp, done = finished
    run_page = server.api.handle("GET", f"/apis/v2beta1/runs/{done.run_id}", {}, "", b"")
    assert run_page[0] == 200
    from lab.webui import views

    assert views.answer(server.backend, server.api, f"runs/{done.run_id}")["name"] == \
        server.api.run_name(done.run_id)
    with pytest.raises(views.NotFound):
        views.answer(server.backend, server.api, "runs/no-such-id")
    if shutil.which("chromium") is None:
        pytest.skip("chromium not installed (scripts/standins/50-chromium.sh)")
    ui = UiServer(server.backend, server.api.root, static=static_copy(
        tmp_path / "static", "no-stream.js")).start()
    try:
        name = server.api.run_name(done.run_id)
        dom = chromium(tmp_path, f"{ui.url}#/runs/details/{done.run_id}", "--dump-dom").stdout
        assert f"Run {name}" in dom and 'class="dag"' in dom, dom[dom.find("<main"):][:2000]
        # the experiment's and the pipeline's pages read the KFP API, as KFP's UI does
        dom = chromium(tmp_path, f"{ui.url}#/experiments/details/{exp.experiment_id}",
                       "--dump-dom").stdout
        assert "KFP experiment lab-exp" in dom and \
            f'href="#/runs/details/{done.run_id}"' in dom, dom[dom.find("<main"):][:2000]
        dom = chromium(tmp_path, f"{ui.url}#/pipelines/details/{pipeline.pipeline_id}",
                       "--dump-dom").stdout
        assert "Pipeline tiny-add" in dom and "Pipeline spec" in dom, \
            dom[dom.find("<main"):][:2000]
    finally:
        ui.stop()


def test_kflab_delete_run_of_a_running_api_run(client: Any, server: Any) -> None:
    """`kflab delete run NAME` on a run started through the API stops it and deletes it from
    the API too, as on a cluster, where it calls KFP's delete_run (it showed FAILED, "no
    record of the run")."""
    run = client.create_run_from_pipeline_func(napping, arguments={"seconds": 120.0},
                                               run_name="deleted from the CLI")
    wait_state(client, run.run_id, {"RUNNING"})
    name = server.api.run_name(run.run_id)
    done = run_kflab("--state", str(server.api.root), "delete", "run", name)
    assert done.returncode == 0, done.stderr
    with pytest.raises(kfp_server_api_exception()) as err:
        client.get_run(run.run_id)
    assert err.value.status == 404
    assert run.run_id not in [r.run_id for r in client.list_runs(page_size=100).runs]


def test_no_run_process_is_left_a_zombie(client: Any, finished: Any, server: Any) -> None:
    """Issue 34: `kflab ui` kept one zombie process per run started through the API."""
    import time

    for run in client.list_runs(page_size=100).runs:
        if run.state in ("PENDING", "RUNNING"):
            wait_state(client, run.run_id, {"SUCCEEDED", "FAILED", "CANCELED"})
    time.sleep(1)
    started = list(server.api.runs.procs.values())
    assert len(started) >= 4
    zombies = []
    for proc in started:
        status = Path(f"/proc/{proc.pid}/status")
        if status.exists() and "State:\tZ" in status.read_text():
            zombies.append(proc.pid)
    assert zombies == [], f"zombie run processes: {zombies}"



def test_exchanges_match_the_kfp_2_16_schema(finished: Any, server: Any, schema: Any) -> None:
    seen = set()
    for method, path, status, sent, out in server.exchanges:
        if status != 200 and path.startswith("/apis/v2beta1/pipelines/upload"):
            # the upload server writes an apiv1beta1.Error, not a google.rpc.Status
            # (pipeline_upload_server.go writeErrorToResponse)
            assert set(out) == {"error_message", "error_details"}, out
            continue
        if status != 200:
            schema("googlerpcStatus", out)
            continue
        op = _operation(schema.paths, method, path)
        assert op is not None, f"{method} {path} is not a KFP 2.16 API call"
        seen.add(op["operationId"])
        for p in op.get("parameters", []):
            if p["in"] == "body" and sent is not None:
                schema(p["schema"]["$ref"].split("/")[-1], sent, sent=True)
        ref = op["responses"]["200"]["schema"].get("$ref")
        if op["operationId"] == "HealthzService_GetHealthz":
            # apiserver/main.go writes commit_sha and tag_name too (not in the swagger)
            out = {k: v for k, v in out.items() if k not in ("commit_sha", "tag_name")}
        if ref:
            schema(ref.split("/")[-1], out)
    assert {"UploadPipeline", "RunService_CreateRun", "RunService_GetRun",
            "ExperimentService_CreateExperiment", "HealthzService_GetHealthz",
            "RunService_ListRuns", "RunService_ArchiveRun", "RunService_UnarchiveRun",
            "RunService_DeleteRun", "RunService_TerminateRun", "RunService_RetryRun",
            "ExperimentService_ArchiveExperiment", "ExperimentService_UnarchiveExperiment",
            "ExperimentService_DeleteExperiment", "PipelineService_ListPipelines",
            "PipelineService_DeletePipeline", "PipelineService_DeletePipelineVersion",
            "PipelineService_GetPipelineByName", "UploadPipelineVersion",
            "RecurringRunService_CreateRecurringRun", "RecurringRunService_GetRecurringRun",
            "RecurringRunService_ListRecurringRuns", "RecurringRunService_DisableRecurringRun",
            "RecurringRunService_EnableRecurringRun",
            "RecurringRunService_DeleteRecurringRun"} <= seen, sorted(seen)


def _operation(paths: dict[str, Any], method: str, path: str) -> dict[str, Any] | None:
    import re

    for template, ops in paths.items():
        pattern = re.sub(r"\{[^}]+\}", r"[^/:]+", template)
        if re.fullmatch(pattern, path) and method.lower() in ops:
            return ops[method.lower()]
    return None
