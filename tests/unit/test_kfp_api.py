"""The local KFP API's refusals: what the KFP API server answers with an error, answered here
with one too (a google.rpc.Status body, the HTTP status of grpc-gateway's mapping), and
nothing recorded. No run is started: these requests never reach the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.backends.local import LocalBackend
from lab.webui.kfp_api import KfpApi

SPEC = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {
    "a": {"taskInfo": {"name": "a"}}, "b": {"taskInfo": {"name": "b"}, "dependentTasks": ["a"]}}}},
    "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.16.0"}


@pytest.fixture
def api(tmp_path: Path) -> KfpApi:
    return KfpApi(tmp_path, LocalBackend(str(tmp_path)))


def upload(api: KfpApi, content: bytes, query: dict[str, str] | None = None,
           path: str = "/apis/v2beta1/pipelines/upload") -> tuple[int, dict[str, Any]]:
    body = (b"--XX\r\nContent-Disposition: form-data; name=\"uploadfile\"; "
            b"filename=\"p.yaml\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            + content + b"\r\n--XX--\r\n")
    return api.handle("POST", path, query or {}, "multipart/form-data; boundary=XX", body)


def post(api: KfpApi, path: str, data: Any) -> tuple[int, dict[str, Any]]:
    return api.handle("POST", path, {}, "application/json", json.dumps(data).encode())


def test_upload_records_pipeline_and_version(api: KfpApi) -> None:
    status, pipe = upload(api, yaml.safe_dump(SPEC).encode(), {"name": "p"})
    assert status == 200 and pipe["name"] == "p"
    status, versions = api.handle("GET", f"/apis/v2beta1/pipelines/{pipe['pipeline_id']}/"
                                  "versions", {}, "", b"")
    assert status == 200 and versions["total_size"] == 1
    assert versions["pipeline_versions"][0]["pipeline_spec"] == SPEC
    assert upload(api, yaml.safe_dump(SPEC).encode(), {"name": "p"})[0] == 409  # same name
    status, v2 = upload(api, yaml.safe_dump(SPEC).encode(),
                        {"pipelineid": pipe["pipeline_id"], "name": "v2"},
                        "/apis/v2beta1/pipelines/upload_version")
    assert status == 200 and v2["pipeline_id"] == pipe["pipeline_id"]


@pytest.mark.parametrize(("content", "message"), [
    (b"a: [", "invalid YAML"),
    (b"just: text", "no 'root'"),
    (yaml.safe_dump({"root": {}}).encode() + b"---\n- 1\n", "platform_spec"),
])
def test_upload_refuses_what_is_not_a_pipeline(api: KfpApi, content: bytes,
                                                message: str) -> None:
    status, body = upload(api, content)
    assert status == 400 and message in body["message"] and body["code"] == 3
    assert api.handle("GET", "/apis/v2beta1/pipelines", {}, "", b"")[1]["pipelines"] == []


def test_runs_refuse_bad_requests_before_anything_runs(api: KfpApi) -> None:
    cases = [
        ({"pipeline_spec": SPEC}, 400, "display_name"),
        ({"display_name": "r"}, 400, "either pipeline_spec or pipeline_version_reference"),
        ({"display_name": "r", "pipeline_spec": {"x": 1}}, 400, "no 'root'"),
        ({"display_name": "r", "pipeline_spec": SPEC,
          "runtime_config": {"pipeline_root": "gs://b"}}, 400, "pipeline_root"),
        ({"display_name": "r", "pipeline_spec": SPEC, "experiment_id": "nope"}, 404,
         "experiment nope not found"),
        ({"display_name": "r", "pipeline_version_reference": {"pipeline_id": "nope"}}, 404,
         "pipeline nope not found"),
    ]
    for data, code, message in cases:
        status, body = post(api, "/apis/v2beta1/runs", data)
        assert (status, message in body["message"]) == (code, True), (data, body)
    assert api.handle("GET", "/apis/v2beta1/runs", {}, "", b"")[1]["runs"] == []
    assert api.procs == {}
    status, body = api.handle("POST", "/apis/v2beta1/runs", {}, "application/json", b"{")
    assert status == 400 and "not JSON" in body["message"]


def test_unknown_calls_and_filters(api: KfpApi) -> None:
    assert api.handle("GET", "/apis/v2beta1/recurringruns", {}, "", b"")[0] == 404
    assert api.handle("DELETE", "/apis/v2beta1/runs", {}, "", b"")[0] == 405
    assert api.handle("GET", "/apis/v2beta1/runs/x", {}, "", b"")[0] == 404
    post(api, "/apis/v2beta1/experiments", {"display_name": "e"})
    assert post(api, "/apis/v2beta1/experiments", {"display_name": "e"})[0] == 409
    neq = json.dumps({"predicates": [{"operation": "NOT_EQUALS", "key": "display_name",
                                      "string_value": "e"}]})
    status, body = api.handle("GET", "/apis/v2beta1/experiments", {"filter": neq}, "", b"")
    assert status == 501 and "EQUALS" in body["message"]
    eq = json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name",
                                     "string_value": "e"}]})
    found = api.handle("GET", "/apis/v2beta1/experiments", {"filter": eq}, "", b"")[1]
    assert [e["display_name"] for e in found["experiments"]] == ["e"]


def test_dag_of_an_api_run_comes_from_its_spec(api: KfpApi, tmp_path: Path) -> None:
    """The graph's edges for a run created through the API (read from the spec it ran)."""
    api.dir.joinpath("specs").mkdir(parents=True)
    api.dir.joinpath("specs", "r1.yaml").write_text(yaml.safe_dump(SPEC))
    from lab import state

    state.write_json(api.dir / "runs" / "r1.json",
                     {"run_id": "r1", "name": "run-r1", "display_name": "r1"})
    assert api.dag_of("run-r1") == {"a": [], "b": ["a"]}
    assert api.dag_of("other") is None
