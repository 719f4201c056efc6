"""The JSON behind `kflab ui`'s pages (lab/webui/views.py, run_page.py), over real HTTP, from
real work on the local backend: a pipeline's artifact offered for download (only from the
state folder), a PyTorchJob's counts once per replica type, a Katib trial's own page, and the
server's cookies named per port with a page that says what to do without the token."""

from __future__ import annotations

import http.client
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.backends.local import LocalBackend
from lab.scenarios.actions import pipeline_run_manifest
from lab.webui.server import UiServer
from tests.unit.test_webui_server import call
from tests.unit.tuning_helpers import TRIAL, experiment

PIPELINES = Path(__file__).resolve().parents[1] / "data" / "pipelines"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root, work = tmp_path_factory.mktemp("state"), tmp_path_factory.mktemp("work")
    backend = LocalBackend(str(root))
    run = backend.apply(pipeline_run_manifest("tiny.py", "tiny", {"n": 3}), base_dir=PIPELINES)
    assert run["status"]["state"] == "SUCCEEDED"
    replica = {"restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "pytorch/pytorch",  # a base kflab runs as a process
         "command": [sys.executable, "-c", "print('hi')"]}]}}}
    backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                   "metadata": {"name": "ddp"},
                   "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **replica},
                                                    "Worker": {"replicas": 2, **replica}}}},
                  base_dir=work)
    (work / "trial.py").write_text(TRIAL)
    exp = experiment(maxTrialCount=2, parallelTrialCount=1)
    exp["metadata"]["name"] = "hpo"
    backend.apply(exp, base_dir=work)
    server = UiServer(backend, root).start()
    yield server
    server.stop()


def get(ui: UiServer, path: str) -> tuple[int, Any, dict[str, str]]:
    status, body, headers = call(ui, path, {"Cookie": f"{ui.cookie('token')}={ui.token}"})
    is_json = headers.get("Content-Type") == "application/json"
    return status, json.loads(body) if is_json else body, headers


def test_an_artifact_is_offered_for_download_from_the_state_folder_only(ui: UiServer) -> None:
    status, page, _ = get(ui, "/ui-api/runs/tiny")
    assert status == 200
    make = next(t for t in page["tasks"] if t["key"] == "make")
    data = next(a for a in make["artifacts"] if a["name"] == "data")
    assert data["download"] and data["uri"]
    status, body, headers = get(ui, "/ui-api/runs/tiny/artifacts/make/data?download=1")
    assert status == 200 and body == b"xxx"
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"].startswith("attachment; filename=")
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    # without ?download a Dataset is no page to show
    assert get(ui, "/ui-api/runs/tiny/artifacts/make/data")[0] == 404
    # a record edited to point outside the state folder's pipeline-root is refused
    obj = ui.backend.get("PipelineRun", "tiny")
    task = next(t for t in obj["status"]["run_details"]["task_details"]
                if t["display_name"] == "make")
    task["outputs"]["artifacts"]["data"]["path"] = "/etc/passwd"
    ui.backend.store.put(obj)
    try:
        status, body, _ = get(ui, "/ui-api/runs/tiny/artifacts/make/data?download=1")
        assert status == 404 and "not readable here" in body["message"]
    finally:
        task["outputs"]["artifacts"]["data"]["path"] = data_path(ui)
        ui.backend.store.put(obj)


def data_path(ui: UiServer) -> str:
    root = Path(ui.backend.get("PipelineRun", "tiny")["status"]["pipeline_root"])
    return str(root / "make" / "data")


def test_the_task_panel_has_inputs_and_the_run_its_parameters(ui: UiServer) -> None:
    status, page, _ = get(ui, "/ui-api/runs/tiny")
    assert page["arguments"] == {"n": 3} and page["duration_s"] is not None
    status, panel, _ = get(ui, "/ui-api/runs/tiny/tasks/train")
    assert status == 200 and panel["inputs"]["parameters"] == {"fail": False}
    data = panel["inputs"]["artifacts"][0]
    assert data["name"] == "data" and data["from"] == {"task": "make", "output": "data"}
    assert panel["metrics"]["accuracy"] == 0.3 and isinstance(panel["log"], list)
    assert get(ui, "/ui-api/info")[1] == {"backend": "local", "kfp_api": True}


def test_a_pytorchjob_counts_each_replica_type_once(ui: UiServer) -> None:
    """replicaStatuses counts a type; the page used to repeat the Worker counts on each
    worker's row, so two workers read as four succeeded."""
    rows = get(ui, "/ui-api/jobs")[1]
    row = next(r for r in rows if r["name"] == "ddp")
    assert row["replicas"] == [
        {"type": "Master", "replicas": 1, "active": 0, "succeeded": 1, "failed": 0},
        {"type": "Worker", "replicas": 2, "active": 0, "succeeded": 2, "failed": 0}]
    page = get(ui, "/ui-api/jobs/PyTorchJob/ddp")[1]
    assert page["replica_list"] == [{"name": "master-0", "type": "Master"},
                                    {"name": "worker-0", "type": "Worker"},
                                    {"name": "worker-1", "type": "Worker"}]


def test_a_katib_trial_has_its_own_page(ui: UiServer) -> None:
    exp = get(ui, "/ui-api/experiments/hpo")[1]
    assert exp["parameter_names"] == ["x", "n"] and exp["metric_names"] == ["loss"]
    trial = exp["trials"][0]
    assert set(trial["parameters"]) == {"x", "n"} and "loss" in trial["metrics"]
    status, page, _ = get(ui, f"/ui-api/experiments/hpo/trials/{trial['name']}")
    assert status == 200 and page["parameters"] == trial["parameters"]
    assert any(line.startswith("loss=") for line in page["log"])
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in page["conditions"])
    assert get(ui, "/ui-api/experiments/hpo/trials/someone-else")[0] == 404


def test_cookies_are_named_per_port_and_a_tab_without_the_token_is_told_why(
        ui: UiServer, tmp_path: Path) -> None:
    """Browsers keep cookies per host, not per port: two servers' cookies of one name would
    overwrite each other (the first tab then got a bare 403)."""
    other = UiServer(LocalBackend(str(tmp_path)), tmp_path).start()
    try:
        names = set()
        for server in (ui, other):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("GET", f"/?token={server.token}",
                         headers={"Host": f"127.0.0.1:{server.port}"})
            res = conn.getresponse()
            res.read()
            conn.close()
            cookies = [v.split("=", 1)[0] for k, v in res.getheaders() if k == "Set-Cookie"]
            names |= set(cookies)
            assert f"kflab_token_{server.port}" in cookies
        assert len(names) == 4  # a token and a session cookie for each
        # the old name opens nothing
        assert call(ui, "/ui-api/runs", {"Cookie": f"kflab_token={ui.token}"})[0] == 403
        status, body, headers = call(ui, "/")
        assert status == 403 and headers["Content-Type"].startswith("text/html")
        assert b"Open the URL that <code>kflab ui</code> printed" in body
    finally:
        other.stop()


def test_the_page_is_split_into_small_modules_all_preloaded() -> None:
    """The page's own code: ES modules served as files (no build step), one per view, none
    over 650 lines (issue 36), each preloaded by index.html so the browser fetches them at
    once rather than one import after another."""
    from lab.webui.server import STATIC

    modules = sorted(p.relative_to(STATIC).as_posix() for p in (STATIC / "js").rglob("*.js"))
    assert "js/main.js" in modules and len([m for m in modules if "/views/" in m]) >= 10
    index = (STATIC / "index.html").read_text()
    for module in modules:
        lines = len((STATIC / module).read_text().splitlines())
        assert lines <= 650, f"{module}: {lines} lines"
        if module != "js/main.js":
            assert f'<link rel="modulepreload" href="/static/{module}">' in index, module
    assert not (STATIC / "app.js").exists()
