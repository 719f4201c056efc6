"""Every view of `kflab ui`, walked in headless Chromium (over the DevTools protocol) while a
pipeline run, a Katib experiment and a TrainJob run and a model server serves, at 375, 640 and
1280 px wide, in the light and the dark theme (prefers-color-scheme): each view draws without
an error, axe-core (WCAG 2.0/2.1 A and AA) finds nothing, and the page does not scroll
sideways. The KFP objects (pipelines, versions, experiments, runs, a recurring run) are made
with kfp.Client against the UI's own KFP API, as a learner's notebook makes them; the KFP-style
links kfp.Client prints resolve. Nothing is mocked; each view's screenshot lands in the test's
tmp dir."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from lab.backends.local import LocalBackend
from lab.scenarios.actions import pipeline_run_manifest
from lab.webui.server import UiServer
from tests.integration.test_webui_browser import AXE, CHROMIUM, Cdp, static_copy
from tests.unit.tuning_helpers import experiment

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (scripts/standins/50-chromium.sh)")

PIPELINES = Path(__file__).parents[1] / "data" / "pipelines"
REPO = Path(__file__).parents[2]
# a Katib trial and a TrainJob node that run until the test lets them go (at most 5 min)
WAIT = ("import os, sys, time\n"
        "for _ in range(3000):\n"
        "    if os.path.exists({flag!r}):\n"
        "        break\n"
        "    time.sleep(0.1)\n")
GATED = """\
from kfp import dsl


@dsl.component
def gate(flag: str) -> str:
    import os
    import time

    for _ in range(3000):  # until the test opens the gate (at most 5 min)
        if os.path.exists(flag):
            break
        time.sleep(0.1)
    return "open"


@dsl.component
def after(text: str) -> str:
    return text


@dsl.pipeline(name="gated")
def gated(flag: str) -> str:
    return after(text=gate(flag=flag).output).output
"""
TRIAL = WAIT + ("args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if a.startswith('--'))\n"
                "print(f\"loss={{(float(args['x']) - 0.5) ** 2 + int(args['n']) / 10:.6f}}\")\n")


def _cli(root: Path, cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "lab.cli", "--state", str(root), *args],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _until(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"never: {what}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A state folder with finished work, live work, and the UI (with axe added) on it."""
    import joblib
    import kfp
    from kfp import compiler
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    root, work = tmp_path_factory.mktemp("state"), tmp_path_factory.mktemp("work")
    backend = LocalBackend(str(root))
    # finished: a pipeline with sub-DAGs, a PyTorchJob of a master and two workers
    assert backend.apply(pipeline_run_manifest("nested.py", "nested", function="nested"),
                         base_dir=PIPELINES)["status"]["state"] == "SUCCEEDED"
    replica = {"restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "pytorch/pytorch",  # a base kflab runs as a process
         "command": [sys.executable, "-c", "print('hi')"]}]}}}
    backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                   "metadata": {"name": "ddp"},
                   "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **replica},
                                                    "Worker": {"replicas": 2, **replica}}}},
                  base_dir=work)
    # a model server, serving while the views are walked
    X, y = load_iris(return_X_y=True)
    (work / "sk").mkdir()
    joblib.dump(LogisticRegression(max_iter=500).fit(X, y), work / "sk" / "model.joblib")
    backend.apply({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                   "metadata": {"name": "iris"},
                   "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                                    "storageUri": f"file://{work / 'sk'}"}}}},
                  base_dir=work)
    from lab.scenarios import guided, loader

    guided.start(loader.find("katib-hpo"), root, work / "lab", restart=False)
    # live: a pipeline task, a Katib trial and two TrainJob nodes waiting for `go`
    go = work / "go"
    (work / "gated.py").write_text(GATED)
    (work / "trial.py").write_text(TRIAL.format(flag=str(go)))
    exp = experiment(maxTrialCount=2, parallelTrialCount=1)
    exp["metadata"]["name"] = "live-hpo"
    (work / "exp.json").write_text(json.dumps(exp))
    node = [sys.executable, "-c",
            WAIT.format(flag=str(go)) + "print('NODE', os.environ['PET_NODE_RANK'])"]
    (work / "train.json").write_text(json.dumps({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "live-train"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
                 "trainer": {"numNodes": 2, "command": node}}}))
    procs = [_cli(root, work, "pipeline", "run", "gated.py", "--name", "gated-live",
                  "-p", f"flag={go}", "--no-cache"),
             _cli(root, work, "apply", "-f", "exp.json"),
             _cli(root, work, "apply", "-f", "train.json")]
    static = static_copy(tmp_path_factory.mktemp("static") / "static")
    (static / "vendor" / "axe.min.js").write_bytes(AXE.read_bytes())
    index = static / "index.html"
    index.write_text(index.read_text().replace(
        "</head>", '<script src="/static/vendor/axe.min.js" defer></script>\n</head>'))
    server = UiServer(backend, root, static=static).start()
    try:
        # KFP objects, made as a notebook makes them (kfp.Client against this server)
        client = kfp.Client(host=server.host)
        sys.path.insert(0, str(PIPELINES))
        try:
            import tiny
        finally:
            sys.path.remove(str(PIPELINES))
        package = work / "tiny.yaml"
        compiler.Compiler().compile(tiny.tiny, str(package))
        pipeline = client.upload_pipeline(str(package), pipeline_name="tiny",
                                          description="a parameter, a metric, a model")
        version = client.upload_pipeline_version(str(package), pipeline_version_name="tiny-v2",
                                                 pipeline_id=pipeline.pipeline_id)
        kfp_exp = client.create_experiment("lab", description="the lab's runs")
        runs = {n: client.create_run_from_pipeline_package(
            str(package), arguments={"n": n, "fail": n == 4}, run_name=f"tiny-{n}",
            experiment_name="lab").run_id for n in (3, 4, 5)}
        for rid in runs.values():
            client.wait_for_run_completion(rid, timeout=300)
        recurring = client.create_recurring_run(
            kfp_exp.experiment_id, "nightly", cron_expression="0 0 3 * * *",
            pipeline_id=pipeline.pipeline_id, version_id=version.pipeline_version_id,
            params={"n": 2}, max_concurrency=1, enabled=False)
        # the live work is under way
        _until("the gated pipeline's task runs", lambda: any(
            t.get("state") == "RUNNING" for t in ((backend.get("PipelineRun", "gated-live") or {})
                                                  .get("status") or {}).get("run_details", {})
            .get("task_details", [])))
        _until("a trial runs", lambda: any(
            c.get("type") == "Running" and c.get("status") == "True"
            for t in backend.list("Trial") if t["metadata"]["name"].startswith("live-hpo")
            for c in (t.get("status") or {}).get("conditions") or []))
        _until("the TrainJob's nodes run", lambda: (backend.get("TrainJob", "live-train") or {})
               .get("status", {}).get("jobsStatus"))
        trial = next(t["metadata"]["name"] for t in backend.list("Trial")
                     if t["metadata"]["name"].startswith("live-hpo"))
        yield {"server": server, "backend": backend, "runs": runs, "trial": trial,
               "pipeline": pipeline.pipeline_id, "version": version.pipeline_version_id,
               "experiment": kfp_exp.experiment_id, "recurring": recurring.recurring_run_id}
    finally:
        go.touch()
        for p in procs:
            try:
                p.wait(timeout=180)
            except subprocess.TimeoutExpired:
                p.kill()
        server.stop()
        backend.down()


def views(lab: Any) -> list[tuple[str, str]]:
    """(address, text the view must show) for every view."""
    runs = lab["runs"]
    return [
        ("runs", "tiny-3"),
        (f"runs/details/{runs[3]}", "SUCCEEDED"),  # the link kfp.Client prints
        (f"runs/details/{runs[4]}", "training diverged (on purpose)"),  # the error at the top
        (f"runs/details/{runs[3]}/train", "Log of train"),  # a task's side panel
        ("runs/gated-live", "RUNNING"),
        ("runs/gated-live", "not started"),  # a task waiting for the running one is drawn
        ("runs/nested", "sub-pipeline: double-pipeline-2"),
        ("runs/nested/double-pipeline-2%2Fdouble", "double of 6"),
        (f"compare?runlist={runs[3]},{runs[5]}", "Parallel coordinates"),
        ("pipelines", "tiny"),
        (f"pipelines/details/{lab['pipeline']}", "Pipeline spec"),
        (f"pipelines/details/{lab['pipeline']}/version/{lab['version']}", "Version tiny-v2"),
        ("kfp-experiments", "lab"),
        (f"experiments/details/{lab['experiment']}", "tiny-4"),
        ("recurringruns", "nightly"),
        (f"recurringrun/details/{lab['recurring']}", "cron 0 0 3 * * *"),
        ("experiments", "live-hpo"),
        ("experiments/live-hpo", "Running"),
        (f"experiments/live-hpo/trial/{lab['trial']}", "Parameters"),
        ("jobs", "Worker: 2 replicas, 2 succeeded"),
        ("jobs/PyTorchJob/ddp/worker-1", "Log of worker-1"),
        ("jobs/TrainJob/live-train/node-0", "Running"),
        ("inferenceservices", "iris"),
        ("inferenceservices/iris", "Try it"),
        ("notebooks", "Notebook servers"),
        ("labs", "katib-hpo"),
        ("labs/katib-hpo", "current"),
    ]


AXE_RUN = ("axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']})"
           ".then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, "
           "nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))")


@pytest.fixture(scope="module")
def page(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cdp = Cdp(tmp_path_factory.mktemp("browser"))
    cdp.call("Page.navigate", url=f"{lab['server'].url}#/runs")
    cdp.until("document.getElementById('main').dataset.view === 'runs'", timeout=60)
    yield cdp
    cdp.close()


@pytest.mark.parametrize("width", [375, 640, 1280])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_view_in_both_themes_and_widths(lab: Any, page: Any, theme: str, width: int,
                                              tmp_path: Path, record_property: Any) -> None:
    page.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
              deviceScaleFactor=1, mobile=width < 600)
    page.call("Emulation.setEmulatedMedia",
              features=[{"name": "prefers-color-scheme", "value": theme}])
    background = page.js("getComputedStyle(document.body).backgroundColor")
    assert background == ("rgb(18, 20, 22)" if theme == "dark" else "rgb(255, 255, 255)")
    problems = []
    for address, text in views(lab):
        path = "/".join(unquote(p) for p in address.split("?")[0].split("/"))
        page.js(f"location.hash = {json.dumps('#/' + address)}")
        page.until(f"document.getElementById('main').dataset.view === {json.dumps(path)}",
                   timeout=60)
        page.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
                wait=True)  # charts draw on the next frame
        heading = page.js("document.querySelector('#main h1')?.textContent || ''")
        shown = page.js("document.getElementById('main').textContent")  # the graph's too
        if heading in ("Not found", "Could not draw this view", "No such view") or \
                text not in shown:
            problems.append(f"#/{address}: {heading!r}, {text!r} not shown: {shown[:300]!r}")
        wide = page.js("[document.documentElement.scrollWidth, window.innerWidth]")
        if wide[0] > wide[1]:
            problems.append(f"#/{address}: scrolls sideways ({wide[0]} px in {wide[1]})")
        found = json.loads(page.js(AXE_RUN, wait=True))
        if found:
            problems.append(f"#/{address}: axe: {found}")
        shot = page.call("Page.captureScreenshot", format="png")["data"]
        name = address.split("?")[0].replace("/", "_").replace("%2F", "_")[:80]
        (tmp_path / f"{name}.png").write_bytes(base64.b64decode(shot))
    record_property("screenshots", str(tmp_path))
    assert problems == [], "\n".join(problems)


def test_a_stale_tab_and_two_servers_in_one_browser(lab: Any, tmp_path: Path) -> None:
    """Two `kflab ui` servers in one browser keep their own cookie (one per port); a tab whose
    server was restarted (a new token) says so and what to do, not a bare 403."""
    backend = lab["backend"]
    first = UiServer(backend, backend.root).start()
    second = UiServer(backend, backend.root).start()
    cdp = Cdp(tmp_path)
    try:
        for server in (first, second):
            cdp.call("Page.navigate", url=f"{server.url}#/labs")
            cdp.until("document.getElementById('main').dataset.view === 'labs'", timeout=60)
        # back to the first, without its token in the address: its own cookie still holds
        cdp.call("Page.navigate", url=f"{first.host}/#/notebooks")
        cdp.until("document.getElementById('main').dataset.view === 'notebooks'", timeout=60)
        assert "Notebook servers" in cdp.js("document.getElementById('main').innerText")
        # the first server restarts on its port with a new token: the open tab says so
        port = first.port
        first.stop()
        first = UiServer(backend, backend.root, port=port).start()
        cdp.js("location.hash = '#/labs'")
        cdp.until("document.querySelector('#main h1')?.textContent === "
                  "'This tab is no longer connected'", timeout=60)
        assert "Open the URL that `kflab ui` printed" in cdp.js(
            "document.getElementById('main').innerText")
        cdp.call("Page.reload")  # and a reload gets the same advice, as a page
        cdp.until("document.title === 'kflab ui: token needed'", timeout=60)
        assert "printed in its terminal" in cdp.js("document.body.innerText")
    finally:
        cdp.close()
        first.stop()
        second.stop()


def js_list(items: list[str]) -> str:
    """A JS string literal of the JSON of `items`, as JSON.stringify writes it."""
    return json.dumps(json.dumps(items, separators=(",", ":")))


def test_the_runs_list_filters_sorts_pages_and_compares(lab: Any, page: Any) -> None:
    """The runs list sends the KFP API what the KFP UI sends (IS_SUBSTRING on the name,
    sort_by, page_size and page_token) and draws what comes back; ticked runs open the
    comparison."""
    store = lab["backend"].store
    names = [f"page-run-{i}" for i in range(12)]
    for i, name in enumerate(names):  # runs recorded as `kflab pipeline run` records them
        store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                   "metadata": {"name": name, "namespace": "default",
                                "creationTimestamp": f"2030-01-01T00:00:{i:02d}Z"},
                   "spec": {"arguments": {"i": i}},
                   "status": {"state": "SUCCEEDED", "created_at": f"2030-01-01T00:00:{i:02d}Z",
                              "finished_at": f"2030-01-01T00:01:{i:02d}Z",
                              "run_details": {"task_details": []}}})
    rows = ("[...document.querySelectorAll('#main table')[0].tBodies[0].rows]"
            ".map(r => r.cells[1].textContent)")
    try:
        page.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
                  deviceScaleFactor=1, mobile=False)
        page.js("location.hash = '#/labs'")
        page.until("document.getElementById('main').dataset.view === 'labs'")
        page.js("location.hash = '#/runs'")
        page.until("document.getElementById('main').dataset.view === 'runs'")
        page.js("const s = document.getElementById('runs-size'); s.value = '10'; "
                "s.dispatchEvent(new Event('change'))")
        page.js("document.getElementById('runs-search').focus()")
        page.call("Input.insertText", text="page-run")
        page.until("document.querySelector('#main caption').textContent"
                   ".includes('whose name has \"page-run\"')")  # the filter applied
        page.until(f"JSON.stringify({rows}) === {js_list(names[::-1][:10])}")  # newest first
        assert page.js("document.activeElement.id") == "runs-search"  # typing goes on
        assert page.js("document.getElementById('runs-search').value") == "page-run"
        assert "12 runs" in page.js("document.querySelector('#main nav.pager').textContent")
        page.js("document.getElementById('runs-next').click()")
        page.until(f"JSON.stringify({rows}) === {js_list(names[1::-1])}")  # 10 a page
        page.js("document.getElementById('runs-sort-name').click()")  # by name, a to z
        page.until(f"{rows}[0] === 'page-run-0' && {rows}[2] === 'page-run-10'")
        assert page.js("document.getElementById('runs-sort-name').closest('th')"
                       ".getAttribute('aria-sort')") == "ascending"
        for name in ("page-run-0", "page-run-1"):
            page.js(f"document.querySelector('input[aria-label=\"select {name} to compare\"]')"
                    ".click()")
        page.until("document.getElementById('compare-go') !== null")
        page.js("document.getElementById('compare-go').click()")
        page.until("document.getElementById('main').dataset.view === 'compare'")
        shown = page.js("document.getElementById('main').innerText")
        assert "page-run-0" in shown and "page-run-1" in shown and "(differs)" in shown
    finally:
        for name in names:
            store.delete("PipelineRun", name)
        page.js("document.getElementById('compare-clear')?.click()")
