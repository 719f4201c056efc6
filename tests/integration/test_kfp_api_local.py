"""The KFP v2beta1 API of `kflab ui` on the local backend, driven by the real kfp SDK client
(kfp.Client), every exchange checked against the KFP 2.16 swagger
(../shared/upstream/kfp-api-2.16.0; the schema checks skip when it is absent).

One server and one tiny one-component run per module; nothing is mocked. (No
`from __future__ import annotations` here: kfp reads the component's annotations.)"""


import copy
import json
import urllib.request
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


def _strict(defs: dict[str, Any]) -> dict[str, Any]:
    """The swagger's definitions with unknown fields refused: a response carrying a field
    KFP's API does not define fails, as the generated client would silently drop it."""
    out = copy.deepcopy(defs)
    for d in out.values():
        if "properties" in d and "additionalProperties" not in d:
            d["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def schema() -> Any:
    import jsonschema

    doc = json.loads(need_upstream(*SWAGGER_PARTS).read_text())
    defs = _strict(doc["definitions"])

    validators: dict[str, Any] = {}

    def check(ref: str, data: Any) -> None:
        if ref not in validators:
            validators[ref] = jsonschema.Draft4Validator(
                {"$ref": f"#/definitions/{ref}", "definitions": defs})
        validators[ref].validate(data)
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
    rec = server.backend.get("PipelineRun", next(
        r["name"] for r in server.api._all("runs") if r["run_id"] == done.run_id))
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


def test_a_failed_run_says_why(client: Any) -> None:
    """A task that raises: the run is FAILED with the engine's message naming the task, and
    the task is FAILED."""
    result = client.create_run_from_pipeline_func(failing, arguments={"why": "loss is nan"})
    done = client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=1)
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


def test_exchanges_match_the_kfp_2_16_schema(finished: Any, server: Any, schema: Any) -> None:
    seen = set()
    for method, path, status, sent, out in server.exchanges:
        if status != 200:
            schema("googlerpcStatus", out)
            continue
        op = _operation(schema.paths, method, path)
        assert op is not None, f"{method} {path} is not a KFP 2.16 API call"
        seen.add(op["operationId"])
        for p in op.get("parameters", []):
            if p["in"] == "body" and sent is not None:
                schema(p["schema"]["$ref"].split("/")[-1], sent)
        ref = op["responses"]["200"]["schema"].get("$ref")
        if ref:
            schema(ref.split("/")[-1], out)
    assert {"UploadPipeline", "RunService_CreateRun", "RunService_GetRun",
            "ExperimentService_CreateExperiment", "HealthzService_GetHealthz"} <= seen


def _operation(paths: dict[str, Any], method: str, path: str) -> dict[str, Any] | None:
    import re

    for template, ops in paths.items():
        pattern = re.sub(r"\{[^}]+\}", r"[^/:]+", template)
        if re.fullmatch(pattern, path) and method.lower() in ops:
            return ops[method.lower()]
    return None
