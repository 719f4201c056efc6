"""The local KFP API's rules and refusals: what the KFP 2.16 API server answers with an error,
answered here with one too (a google.rpc.Status body -- or, for uploads, the upload server's
{error_message, error_details} -- under the HTTP status grpc-gateway maps the code to), and
nothing recorded. No run is started here: these requests never reach the engine (the
integration tests in test_kfp_api_local.py run pipelines through kfp.Client)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.backends.local import LocalBackend
from lab.webui.kfp_api import KfpApi

SPEC = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {
    "a": {"taskInfo": {"name": "a"}}, "b": {"taskInfo": {"name": "b"}, "dependentTasks": ["a"]}}}},
    "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.16.0"}
API = "/apis/v2beta1"


@pytest.fixture
def api(tmp_path: Path) -> KfpApi:
    return KfpApi(tmp_path, LocalBackend(str(tmp_path)))


def upload(api: KfpApi, content: bytes, query: dict[str, str] | None = None,
           path: str = f"{API}/pipelines/upload") -> tuple[int, dict[str, Any]]:
    body = (b"--XX\r\nContent-Disposition: form-data; name=\"uploadfile\"; "
            b"filename=\"p.yaml\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            + content + b"\r\n--XX--\r\n")
    return api.handle("POST", path, query or {}, "multipart/form-data; boundary=XX", body)


def post(api: KfpApi, path: str, data: Any = None, query: dict[str, str] | None = None
         ) -> tuple[int, dict[str, Any]]:
    raw = json.dumps(data).encode() if data is not None else b""
    return api.handle("POST", path, query or {}, "application/json", raw)


def get(api: KfpApi, path: str, query: dict[str, str] | None = None
        ) -> tuple[int, dict[str, Any]]:
    return api.handle("GET", path, query or {}, "", b"")


def delete(api: KfpApi, path: str, query: dict[str, str] | None = None
           ) -> tuple[int, dict[str, Any]]:
    return api.handle("DELETE", path, query or {}, "", b"")


def test_upload_records_pipeline_and_version(api: KfpApi) -> None:
    status, pipe = upload(api, yaml.safe_dump(SPEC).encode(), {"name": "p"})
    assert status == 200 and pipe["name"] == "p" and "namespace" not in pipe
    status, versions = get(api, f"{API}/pipelines/{pipe['pipeline_id']}/versions")
    assert status == 200 and versions["total_size"] == 1
    assert versions["pipeline_versions"][0]["pipeline_spec"] == SPEC
    status, body = upload(api, yaml.safe_dump(SPEC).encode(), {"name": "p"})  # same name
    assert status == 409 and body["error_message"] == \
        "Failed to create a pipeline and a pipeline version"
    status, v2 = upload(api, yaml.safe_dump(SPEC).encode(),
                        {"pipelineid": pipe["pipeline_id"], "name": "v2"},
                        f"{API}/pipelines/upload_version")
    assert status == 200 and v2["pipeline_id"] == pipe["pipeline_id"]
    status, body = upload(api, yaml.safe_dump(SPEC).encode(),  # kfp.Client's pipelineid=None
                          {"name": "v3"}, f"{API}/pipelines/upload_version")
    assert status == 400 and body["error_message"] == "Failed to create a pipeline version"


@pytest.mark.parametrize(("content", "message"), [
    (b"a: [", "invalid YAML"),
    (b"just: text", "no 'root'"),
    (yaml.safe_dump({"root": {}}).encode() + b"---\n- 1\n", "platform_spec"),
])
def test_upload_refuses_what_is_not_a_pipeline(api: KfpApi, content: bytes,
                                                message: str) -> None:
    """pipeline_upload_server.go writeErrorToResponse: {error_message, error_details};
    kflab's reason is in error_details."""
    status, body = upload(api, content)
    assert status == 400 and message in body["error_details"]
    assert body["error_message"] == "Failed to read a pipeline spec file"
    assert get(api, f"{API}/pipelines")[1] == {}  # nothing recorded, nothing listed


def test_runs_refuse_bad_requests_before_anything_runs(api: KfpApi) -> None:
    cases = [
        ({"pipeline_spec": SPEC}, 400, "The run name is empty"),
        ({"display_name": "r"}, 400, "either pipeline_spec or pipeline_version_reference"),
        ({"display_name": "r", "pipeline_spec": {"x": 1}}, 400, "no 'root'"),
        ({"display_name": "r", "pipeline_spec": SPEC,
          "runtime_config": {"pipeline_root": "gs://b"}}, 400, "pipeline_root"),
        ({"display_name": "r", "pipeline_spec": SPEC, "experiment_id": "nope"}, 404,
         "Experiment nope not found"),
        ({"display_name": "r", "pipeline_version_reference": {"pipeline_id": "nope"}}, 404,
         "Pipeline nope not found"),
        ({"display_name": "r", "pipeline_spec": SPEC, "colour": "red"}, 400,
         'unknown field "colour"'),
    ]
    for data, code, message in cases:
        status, body = post(api, f"{API}/runs", data)
        assert (status, message in body["message"]) == (code, True), (data, body)
    assert get(api, f"{API}/runs")[1] == {}
    assert api.runs.procs == {}
    status, body = post(api, f"{API}/runs", None)
    status, body = api.handle("POST", f"{API}/runs", {}, "application/json", b"{")
    assert status == 400 and "not JSON" in body["message"]


def test_a_deeply_nested_body_is_a_400_not_a_500(api: KfpApi) -> None:
    """Issue 34: a pipeline_spec nested ~500 deep was 'HTTP 500 unexpected RecursionError';
    the depth is checked on the raw text before anything parses it (jsonlimit.py)."""
    deep: Any = "x"
    for _ in range(500):
        deep = [deep]
    spec = {**SPEC, "root": {"dag": {"tasks": {}}, "deep": deep}}
    for path in (f"{API}/runs", f"{API}/recurringruns", f"{API}/experiments",
                 f"{API}/pipelines"):
        status, body = post(api, path, {"display_name": "deep", "pipeline_spec": spec})
        assert status == 400 and "nested 503 levels deep" in body["message"], body
    bomb = b"[" * 100_000 + b"]" * 100_000
    status, body = api.handle("POST", f"{API}/runs", {}, "application/json", bomb)
    assert status == 400 and "MAX_DEPTH" in body["message"]
    status, _ = get(api, f"{API}/runs", {"filter": "[" * 5000})
    assert status == 400
    assert not (api.dir / "runs").exists()


def test_unknown_calls_and_kfp_error_bodies(api: KfpApi) -> None:
    assert get(api, f"{API}/visualizations")[0] == 404
    assert delete(api, f"{API}/runs")[0] == 405
    status, body = get(api, f"{API}/runs/x")
    assert status == 404 and body["code"] == 5
    assert body["message"] == ("Failed to get a run: Failed to fetch run x: "
                               "ResourceNotFoundError: Run x not found")
    assert body["details"] == [{"@type": "type.googleapis.com/google.rpc.Status", "code": 5,
                                "message": "Run x not found"}]
    post(api, f"{API}/experiments", {"display_name": "e"})
    status, body = post(api, f"{API}/experiments", {"display_name": "e"})
    assert status == 409 and "The name e already exists" in body["message"]
    eq = json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name",
                                     "string_value": "e"}]})
    found = get(api, f"{API}/experiments", {"filter": eq})[1]
    assert [e["display_name"] for e in found["experiments"]] == ["e"]
    assert found["experiments"][0]["last_run_created_at"] == "1970-01-01T00:00:00Z"


def test_experiments_archive_delete_as_kfp(api: KfpApi) -> None:
    """resource_manager.go DeleteExperiment (never the default one), experiment_store.go
    ArchiveExperiment (twice is no error) / UnarchiveExperiment."""
    _, exp = post(api, f"{API}/experiments", {"display_name": "lab"})
    eid = exp["experiment_id"]
    assert post(api, f"{API}/experiments/{eid}:archive") == (200, {})
    assert post(api, f"{API}/experiments/{eid}:archive") == (200, {})
    assert get(api, f"{API}/experiments/{eid}")[1]["storage_state"] == "ARCHIVED"
    archived = json.dumps({"predicates": [{"operation": "EQUALS", "key": "storage_state",
                                           "stringValue": "ARCHIVED"}]})
    assert get(api, f"{API}/experiments", {"filter": archived})[1]["total_size"] == 1
    assert post(api, f"{API}/experiments/{eid}:unarchive") == (200, {})
    assert post(api, f"{API}/experiments/nope:archive")[0] == 404
    default = api.experiments.default_id()
    status, body = delete(api, f"{API}/experiments/{default}")
    assert status == 409 and "The default experiment cannot be deleted" in body["message"]
    assert delete(api, f"{API}/experiments/{eid}") == (200, {})
    assert get(api, f"{API}/experiments/{eid}")[0] == 404
    assert delete(api, f"{API}/experiments/{eid}")[0] == 404


def test_pipelines_delete_get_by_name_and_create(api: KfpApi) -> None:
    """resource_manager.go DeletePipeline (refused while versions exist unless cascade),
    PipelineServer.GetPipelineByName (by `name`), CreatePipeline (no version)."""
    _, pipe = upload(api, yaml.safe_dump(SPEC).encode(), {"name": "p", "display_name": "P"})
    pid = pipe["pipeline_id"]
    assert get(api, f"{API}/pipelines/names/p")[1]["pipeline_id"] == pid
    status, body = get(api, f"{API}/pipelines/names/P")
    assert status == 404 and "Namespace/Pipeline /P not found" in body["message"]
    status, body = delete(api, f"{API}/pipelines/{pid}")
    assert status == 400 and "as it has existing pipeline versions" in body["message"]
    vid = get(api, f"{API}/pipelines/{pid}/versions")[1]["pipeline_versions"][0][
        "pipeline_version_id"]
    assert delete(api, f"{API}/pipelines/{pid}/versions/{vid}") == (200, {})
    assert delete(api, f"{API}/pipelines/{pid}") == (200, {})
    assert get(api, f"{API}/pipelines/{pid}")[0] == 404
    status, made = post(api, f"{API}/pipelines", {"display_name": "empty"})
    assert status == 200 and made["name"] == "empty"
    assert post(api, f"{API}/pipelines", {"display_name": "empty"})[0] == 409
    _, again = upload(api, yaml.safe_dump(SPEC).encode(), {"name": "q"})
    assert delete(api, f"{API}/pipelines/{again['pipeline_id']}", {"cascade": "true"}) == \
        (200, {})
    assert api.records.all("versions") == []


def test_a_version_from_a_url(api: KfpApi) -> None:
    """PipelineServer.CreatePipelineVersion: the spec is fetched from package_url."""
    served = yaml.safe_dump(SPEC).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            return

        def do_GET(self) -> None:
            ok = self.path == "/p.yaml"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(served if ok else b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # a stand-in web server
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _, pipe = post(api, f"{API}/pipelines", {"display_name": "from-url"})
        pid, url = pipe["pipeline_id"], f"http://127.0.0.1:{server.server_address[1]}"
        body = {"pipeline_id": pid, "display_name": "v1",
                "package_url": {"pipeline_url": f"{url}/p.yaml"}}
        status, version = post(api, f"{API}/pipelines/{pid}/versions", body)
        assert status == 200 and version["pipeline_spec"] == SPEC, version
        assert version["package_url"] == {"pipeline_url": f"{url}/p.yaml"}
        status, err = post(api, f"{API}/pipelines/{pid}/versions",
                           {**body, "display_name": "v2",
                            "package_url": {"pipeline_url": f"{url}/missing.yaml"}})
        assert status == 400 and "Request returned 404" in err["message"]
        status, err = post(api, f"{API}/pipelines/{pid}/versions",
                           {**body, "package_url": {"pipeline_url": "file:///etc/passwd"}})
        assert status == 400 and "invalid pipeline spec URI" in err["message"]
        assert post(api, f"{API}/pipelines/{pid}/versions", body)[0] == 409  # same name
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("change", "code", "message"), [
    ({"max_concurrency": "0"}, 400, "Max concurrency of a recurring run must be at least 1 "
                                    "and at most 10. Received 0"),
    ({"max_concurrency": "11"}, 400, "Received 11"),
    ({"trigger": {"cron_schedule": {"cron": "* * *"}}}, 400,
     "Schedule cron is not a supported format(https://godoc.org/github.com/robfig/cron). "
     "Error: Expected 5 to 6 fields, found 3"),
    ({"trigger": {"periodic_schedule": {"interval_second": "0"}}}, 400,
     "Found invalid period schedule interval 0"),
    ({"display_name": ""}, 400, "Recurring run's name cannot be empty"),
    ({"experiment_id": "nope"}, 404, "Experiment nope not found"),
    ({"pipeline_spec": None}, 400, "Cannot create a job with an empty pipeline ID"),
])
def test_recurring_runs_refuse_what_kfp_refuses(api: KfpApi, change: dict[str, Any],
                                                code: int, message: str) -> None:
    """api_converter.go toModelJob's checks; job_server.go createJob."""
    body = {"display_name": "nightly", "pipeline_spec": SPEC, "mode": "ENABLE",
            "max_concurrency": "1",
            "trigger": {"periodic_schedule": {"interval_second": "3600"}}, **change}
    status, err = post(api, f"{API}/recurringruns", body)
    assert status == code and message in err["message"], err
    assert get(api, f"{API}/recurringruns")[1] == {}


def test_recurring_run_records_and_modes(api: KfpApi) -> None:
    """The answer's shape (toApiRecurringRun: int64 as text, mode and status), enable and
    disable (ChangeJobMode), delete; the scheduler's sync triggers nothing not yet due."""
    body = {"display_name": "Nightly Train!", "pipeline_spec": SPEC, "mode": "DISABLE",
            "max_concurrency": 2, "no_catchup": True,
            "trigger": {"cron_schedule": {"cron": "0 0 3 * * *",
                                          "start_time": "2030-01-01T00:00:00Z"}}}
    status, rr = post(api, f"{API}/recurringruns", body)
    assert status == 200, rr
    jid = rr["recurring_run_id"]
    assert (rr["status"], rr["mode"], rr["max_concurrency"], rr["no_catchup"]) == \
        ("DISABLED", "DISABLE", "2", True)
    assert rr["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *",
                                               "start_time": "2030-01-01T00:00:00Z"}}
    assert api.records.get("recurringruns", jid)["k8s_name"].startswith("nightlytrain")
    assert post(api, f"{API}/recurringruns/{jid}:enable") == (200, {})
    assert get(api, f"{API}/recurringruns/{jid}")[1]["status"] == "ENABLED"
    due, _ = api.recurring.sync(int(__import__("time").time()))
    assert due > 1893456000  # the first 03:00 after the start time, nothing run yet
    assert api.runs.procs == {}
    listed = get(api, f"{API}/recurringruns", {"sort_by": "display_name desc"})[1]
    assert listed["recurringRuns"][0]["recurring_run_id"] == jid
    assert post(api, f"{API}/recurringruns/{jid}:disable") == (200, {})
    assert delete(api, f"{API}/recurringruns/{jid}") == (200, {})
    status, err = get(api, f"{API}/recurringruns/{jid}")
    assert status == 404 and f"Job {jid} not found" in err["message"]


def test_recurring_parameters_are_formatted(api: KfpApi) -> None:
    """parameter_formatter.go: [[RunUUID]], [[ScheduledTime]], [[Index]], strftime."""
    from lab.webui.kfp_recurring import fnv32a, format_parameter

    assert format_parameter("at [[ScheduledTime]] #[[Index]] [[RunUUID]]", "u1", 25, 0, 3) == \
        "at 19700101000025 #3 u1"  # parameter_formatter_test.go: "FOO 19700101000025 FOO"
    assert format_parameter("{{$.scheduledTime.strftime('%Y-%m-%d')}}", "u", 86400, 0, 1) == \
        "1970-01-02"
    assert format_parameter(7, "u", 0, 0, 1) == 7
    assert fnv32a("a") == 0xE40C292C  # FNV-1a 32 of "a"


def test_dag_of_an_api_run_comes_from_its_spec(api: KfpApi, tmp_path: Path) -> None:
    """The graph's edges for a run created through the API (read from the spec it ran)."""
    api.dir.joinpath("specs").mkdir(parents=True)
    api.dir.joinpath("specs", "r1.yaml").write_text(yaml.safe_dump(SPEC))
    from lab import state

    state.write_json(api.dir / "runs" / "r1.json",
                     {"run_id": "r1", "name": "run-r1", "display_name": "r1"})
    assert api.dag_of("run-r1") == {"a": [], "b": ["a"]}
    assert api.dag_of("other") is None
