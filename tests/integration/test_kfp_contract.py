"""Contract: the kfp.Client calls of the KFP docs, made in the same order against kflab's
local KFP API (`kflab ui`) and against the KFP 2.16 stand-in of the cluster tests
(tests/standins/kfp.py and kfp_resources.py, which write what KFP 2.16.0's API server
writes); every HTTP answer is compared by status and JSON shape (the keys and value types,
recursively), errors also by KFP's user-facing message. The few differences allowed are
listed in ALLOWED, each with its reason. Nothing is mocked: both servers run pipelines.
(No `from __future__ import annotations` here: kfp reads the component's annotations.)"""

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")

from kfp import compiler, dsl  # noqa: E402

from lab.backends.local import LocalBackend  # noqa: E402
from lab.webui.server import UiServer  # noqa: E402

# Paths (dotted, lists as []) whose shape may differ, and why.
ALLOWED = {
    "run_details": "KFP 2.16 lists a run's Argo nodes (drivers, DAG nodes, child pods: "
                   "persistence agent, report_server.go); the local engine lists the "
                   "pipeline's tasks. Both follow PipelineTaskDetail (the schema tests)",
    "runs[].run_details": "as run_details",
    "service_account": "KFP runs a workflow as the pipeline-runner service account; the "
                       "local backend has no Kubernetes service accounts",
    "runs[].service_account": "as service_account",
}
UUID = __import__("re").compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def said(answer: dict[str, Any]) -> str:
    """An error's user-facing message, ids replaced (each server makes its own)."""
    return UUID.sub("<id>", answer["details"][0]["message"])


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="contract-add")
def adding(a: int = 1, b: int = 2) -> int:
    return add(a=a, b=b).output


def by_name(value: str, key: str = "display_name") -> str:
    return json.dumps({"predicates": [{"operation": 1, "key": key, "stringValue": value}]})


def script(client: Any, package: Path, mark: Any) -> None:
    """The documented calls, each announced with mark(label) before it is made."""
    mark("healthz")
    client.get_kfp_healthz()
    mark("create_experiment")
    exp = client.create_experiment("contract", description="the contract test")
    mark("create_experiment again")
    client.create_experiment("contract")
    mark("list_experiments")
    client.list_experiments()
    mark("get_experiment by name")
    client.get_experiment(experiment_name="contract")
    mark("get_experiment by id")
    client.get_experiment(experiment_id=exp.experiment_id)
    mark("upload_pipeline")
    pipe = client.upload_pipeline(str(package), pipeline_name="contract-add")
    mark("upload_pipeline same name")
    with pytest.raises(kfp.client.client.kfp_server_api.ApiException):
        client.upload_pipeline(str(package), pipeline_name="contract-add")
    mark("get_pipeline_id")
    assert client.get_pipeline_id("contract-add") == pipe.pipeline_id
    mark("get_pipeline_id unknown")
    assert client.get_pipeline_id("no-such-name") is None
    mark("upload_pipeline_version by pipeline_name")
    version = client.upload_pipeline_version(str(package), "v2", pipeline_name="contract-add")
    mark("list_pipelines")
    client.list_pipelines(filter=by_name("contract-add"))
    mark("get_pipeline")
    client.get_pipeline(pipe.pipeline_id)
    mark("list_pipeline_versions")
    client.list_pipeline_versions(pipe.pipeline_id, sort_by="created_at desc")
    mark("get_pipeline_version")
    client.get_pipeline_version(pipe.pipeline_id, version.pipeline_version_id)
    mark("create_run_from_pipeline_func")
    first = client.create_run_from_pipeline_func(adding, arguments={"a": 2, "b": 3},
                                                 run_name="first", experiment_name="contract")
    mark("wait_for_run_completion")
    client.wait_for_run_completion(first.run_id, timeout=180, sleep_duration=1)
    mark("run_pipeline from a version")
    second = client.run_pipeline(experiment_id=exp.experiment_id, job_name="second",
                                 pipeline_id=pipe.pipeline_id,
                                 version_id=version.pipeline_version_id, params={"a": 5, "b": 7})
    mark("wait_for_run_completion")
    client.wait_for_run_completion(second.run_id, timeout=180, sleep_duration=1)
    mark("get_run")
    client.get_run(first.run_id)
    mark("list_runs page 1")
    page = client.list_runs(experiment_id=exp.experiment_id, page_size=1,
                            sort_by="created_at desc")
    mark("list_runs page 2")
    client.list_runs(experiment_id=exp.experiment_id, page_size=1,
                     page_token=page.next_page_token)
    mark("list_runs filter")
    client.list_runs(filter=by_name("second"))
    mark("list_runs bad filter")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.list_runs(filter="{not json")
    mark("list_runs unknown key")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.list_runs(filter=by_name("x", key="colour"))
    mark("list_runs bad token")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.list_runs(page_token="not-a-token")
    mark("archive_run")
    client.archive_run(first.run_id)
    mark("archive_experiment")
    client.archive_experiment(exp.experiment_id)
    mark("unarchive_run in an archived experiment")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.unarchive_run(first.run_id)
    mark("unarchive_experiment")
    client.unarchive_experiment(exp.experiment_id)
    mark("unarchive_run")
    client.unarchive_run(first.run_id)
    mark("terminate_run of a finished run")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.terminate_run(first.run_id)
    mark("retry of a run that succeeded")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.runs.run_service_retry_run(run_id=first.run_id)
    mark("create_recurring_run")
    job = client.create_recurring_run(experiment_id=exp.experiment_id, job_name="nightly",
                                      cron_expression="0 0 3 * * *", version_id=version
                                      .pipeline_version_id, pipeline_id=pipe.pipeline_id,
                                      enabled=False, params={"a": 1, "b": 1})
    mark("create_recurring_run max_concurrency 0")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.create_recurring_run(experiment_id=exp.experiment_id, job_name="bad",
                                    interval_second=60, max_concurrency=0,
                                    pipeline_package_path=str(package))
    mark("get_recurring_run")
    client.get_recurring_run(job.recurring_run_id)
    mark("list_recurring_runs")
    client.list_recurring_runs(experiment_id=exp.experiment_id)
    mark("disable_recurring_run")
    client.disable_recurring_run(job.recurring_run_id)
    mark("delete_recurring_run")
    client.delete_recurring_run(job.recurring_run_id)
    mark("delete_run")
    client.delete_run(second.run_id)
    mark("get_run deleted")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.get_run(second.run_id)
    mark("delete_pipeline with versions")
    with contextlib.suppress(kfp.client.client.kfp_server_api.ApiException):
        client.delete_pipeline(pipe.pipeline_id)
    mark("delete_pipeline_version")
    for v in client.list_pipeline_versions(pipe.pipeline_id).pipeline_versions:
        client.delete_pipeline_version(pipe.pipeline_id, v.pipeline_version_id)
    mark("delete_pipeline")
    client.delete_pipeline(pipe.pipeline_id)
    mark("delete_experiment")
    client.delete_experiment(exp.experiment_id)


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if path.lstrip(".") in ALLOWED:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else key
            if sub in ALLOWED:
                continue
            if key not in a or key not in b:
                out.append(f"{sub}: only in {'local' if key in a else 'KFP'}")
            else:
                out += differences(a[key], b[key], sub)
        return out
    if isinstance(a, list) and isinstance(b, list):
        return differences(a[0], b[0], f"{path}[]") if a and b else []
    return [] if a == b else [f"{path}: {a} here, {b} in KFP"]


@pytest.fixture(scope="module")
def exchanges(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """{label: [(status, body), ...]} from each server, after the same script."""
    from tests.standins.kfp import KfpApi, Mlmd, ObjectStore

    package = tmp_path_factory.mktemp("pkg") / "adding.yaml"
    compiler.Compiler().compile(adding, str(package))
    root = tmp_path_factory.mktemp("local")
    ui = UiServer(LocalBackend(str(root)), root)
    local: list[tuple[str, int, Any]] = []
    handle = ui.api.handle
    label = ["start"]

    def recording(method: str, path: str, query: dict, ctype: str, body: bytes) -> Any:
        status, out = handle(method, path, query, ctype, body)
        local.append((label[0], status, json.loads(json.dumps(out))))
        return status, out

    ui.api.handle = recording  # type: ignore[method-assign]
    ui.start()
    standin = KfpApi(tmp_path_factory.mktemp("standin"), Mlmd(), ObjectStore())
    standin.start()
    marks: list[tuple[str, int]] = []
    try:
        script(kfp.Client(host=ui.host), package, lambda name: label.__setitem__(0, name))

        def mark(name: str) -> None:
            marks.append((name, len(standin.responses)))

        script(kfp.Client(host=f"http://127.0.0.1:{standin.port}"), package, mark)
    finally:
        ui.stop()
        standin.stop()
    theirs: dict[str, list[tuple[int, Any]]] = {}
    ends = [i for _, i in marks[1:]] + [len(standin.responses)]
    for (name, start), end in zip(marks, ends, strict=True):
        theirs.setdefault(name, []).extend(
            (code, body) for _, _, code, (_, body) in standin.responses[start:end])
    ours: dict[str, list[tuple[int, Any]]] = {}
    for name, status, body in local:
        if name != "start":  # kfp.Client's own call when it is made
            ours.setdefault(name, []).append((status, body))
    return ours, theirs


def test_every_call_answers_as_kfp_2_16_does(exchanges: Any) -> None:
    ours, theirs = exchanges
    assert list(ours) == list(theirs), (list(ours), list(theirs))
    problems = []
    for label in ours:
        # a wait loop polls as often as it takes: compare the answers it ends with
        mine, kfps = ours[label], theirs[label]
        if label.startswith("wait_for"):
            mine, kfps = mine[-1:], kfps[-1:]
        if [s for s, _ in mine] != [s for s, _ in kfps]:
            problems.append(f"{label}: HTTP {[s for s, _ in mine]} here, "
                            f"{[s for s, _ in kfps]} in KFP")
            continue
        for (status, a), (_, b) in zip(mine, kfps, strict=True):
            found = differences(shape(a), shape(b))
            problems += [f"{label} ({status}): {d}" for d in found]
            # KFP's user-facing message (a parser's own words after it may differ)
            if status >= 400 and "details" in b and not label.endswith(("bad token",
                                                                        "bad filter")) \
                    and said(a) != said(b):
                problems.append(f"{label}: {said(a)!r} here, {said(b)!r} in KFP")
            if status >= 400 and "error_message" in b:
                assert a["error_message"] == b["error_message"], label
    assert problems == [], "\n".join(problems)


def test_the_script_covers_the_documented_calls(exchanges: Any) -> None:
    ours, _ = exchanges
    assert len(ours) >= 40
    statuses = {label: [s for s, _ in answers] for label, answers in ours.items()}
    assert statuses["get_pipeline_id unknown"] == [200]
    assert statuses["list_runs bad filter"] == [400]
    assert statuses["list_runs unknown key"] == [400]
    assert statuses["list_runs bad token"] == [400]
    assert statuses["unarchive_run in an archived experiment"] == [400]
    assert statuses["terminate_run of a finished run"] == [400]
    assert statuses["retry of a run that succeeded"] == [409]
    assert statuses["delete_pipeline with versions"] == [400]
    assert statuses["get_run deleted"] == [404]
    assert statuses["upload_pipeline same name"] == [409]
