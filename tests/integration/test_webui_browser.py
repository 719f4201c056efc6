"""`kflab ui` in a real browser: headless Chromium (scripts/standins/50-chromium.sh; skipped
without it) opens each view with the token: a finished run's tasks, graph and artifacts; a run
in progress; a finished Katib experiment's trials and objective chart; a TFJob whose worker
failed, with that replica's log; axe-core on each view; and the page refused without the
token. Screenshots land in the tests' tmp dirs. Nothing is mocked: the pipelines, the
experiment and the job run on the local backend (one of each per module)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from lab.backends.local import LocalBackend
from lab.scenarios.actions import pipeline_run_manifest
from lab.webui.server import UiServer
from tests.unit.tuning_helpers import TRIAL, experiment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (scripts/standins/50-chromium.sh)")

PIPELINE = """\
from kfp import dsl


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def report(n: int, page: dsl.Output[dsl.HTML], cm: dsl.Output[dsl.ClassificationMetrics]):
    with open(page.path, "w") as fh:
        fh.write(f"<h1>Report</h1><p>n is {n}</p><script>document.title='ran'</script>")
    cm.log_confusion_matrix(["cat", "dog"], [[n, 1], [2, 7]])


@dsl.pipeline(name="two-adds")
def two(a: int = 1) -> int:
    first = add(a=a, b=2)
    second = add(a=first.output, b=3)
    report(n=second.output)
    return second.output
"""


GATED = """\
from kfp import dsl


@dsl.component
def gate(flag: str) -> str:
    import os
    import time

    for _ in range(600):  # until the test opens the gate (at most 60 s)
        if os.path.exists(flag):
            break
        time.sleep(0.1)
    return "open"


@dsl.pipeline(name="gated")
def gated(flag: str) -> str:
    return gate(flag=flag).output
"""


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("state")
    work = tmp_path_factory.mktemp("work")
    (work / "two.py").write_text(PIPELINE)
    backend = LocalBackend(str(root))
    done = backend.apply(pipeline_run_manifest("two.py", "two-adds", {"a": 4}), base_dir=work)
    assert done["status"]["state"] == "SUCCEEDED"
    (work / "trial.py").write_text(TRIAL)
    exp = experiment(maxTrialCount=3, parallelTrialCount=3)
    exp["metadata"]["name"] = "tiny-random"
    backend.apply(exp, base_dir=work)
    chief = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "x", "command": [sys.executable, "-c", "print('ok')"]}]}}}
    worker = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "x",
         "command": [sys.executable, "-c", "import sys; sys.exit('loss is nan')"]}]}}}
    backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                   "metadata": {"name": "broken"},
                   "spec": {"tfReplicaSpecs": {"Chief": chief, "Worker": worker}}},
                  base_dir=work)
    server = UiServer(backend, root).start()
    yield server
    server.stop()


def chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=8000",
         *args, url],
        capture_output=True, text=True, timeout=120, check=False)


def test_run_page_shows_the_finished_tasks_and_graph(ui: Any, tmp_path: Path) -> None:
    url = f"{ui.url}#/runs/two-adds"
    dom = chromium(tmp_path, url, "--dump-dom").stdout
    assert 'data-view="runs/two-adds"' in dom, dom[-2000:]
    assert ">add</a></td>" in dom and ">add-2</a></td>" in dom, dom[dom.find("<main"):]
    assert dom.count('class="state SUCCEEDED"') >= 4  # the run and its three tasks
    assert '{"Output":9}' in dom  # add-2's output parameter: (4 + 2) + 3
    # the graph: three task boxes and the edges add -> add-2 -> report, laid out by dagre
    assert dom.count("<rect") == 3
    assert dom.count('marker-end="url(#arrow)"') == 2
    assert '<a href="#/runs/two-adds/add-2"' in dom  # a box is a link (keyboard reachable)
    # report's artifacts: the confusion matrix as a table, the HTML in a sandboxed frame
    assert "Confusion matrix: report / cm" in dom and "<td>9</td><td>1</td>" in dom
    frame = re.search(r'<iframe src="([^"]+)" sandbox=""', dom)
    assert frame, dom[dom.find("<main"):]
    page = urllib.request.urlopen(urllib.request.Request(
        ui.host + frame.group(1), headers={"Cookie": f"kflab_token={ui.token}"}))
    assert b"<p>n is 9</p>" in page.read()
    assert page.headers["Content-Security-Policy"].startswith("sandbox;")
    assert "script-src" not in page.headers["Content-Security-Policy"]
    log = chromium(tmp_path, f"{ui.url}#/runs/two-adds/add-2", "--dump-dom").stdout
    assert 'data-view="runs/two-adds/add-2"' in log and '<pre class="log"' in log
    assert "Log of add-2" in log
    shot = tmp_path / "run-page.png"
    out = chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1280,900")
    assert shot.exists() and shot.stat().st_size > 5000, out.stderr[-2000:]


def test_a_run_in_progress_then_finished(ui: Any, tmp_path: Path) -> None:
    """The run page while a task runs (RUNNING in the table and the graph), then, after the
    task is let go, the same page finished: states come from the run's record as it goes."""
    import sys
    import time

    from tests.conftest import REPO

    (tmp_path / "gated.py").write_text(GATED)
    flag = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.cli", "--state", str(ui.api.root), "pipeline", "run",
         "gated.py", "-p", f"flag={flag}", "--no-cache"], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run = ui.backend.get("PipelineRun", "gated")
            if run and any(t.get("state") == "RUNNING" for t in
                           run["status"]["run_details"]["task_details"]):
                break
            time.sleep(0.2)
        dom = chromium(tmp_path, f"{ui.url}#/runs/gated", "--dump-dom").stdout
        assert 'class="state RUNNING"' in dom and 'rect width' in dom, dom[-1500:]
        assert 'class="RUNNING"' in dom  # the graph's box
        shot = tmp_path / "run-in-progress.png"
        chromium(tmp_path, f"{ui.url}#/runs/gated", f"--screenshot={shot}",
                 "--window-size=1280,700")
        assert shot.exists()
    finally:
        flag.touch()
        assert proc.wait(timeout=60) == 0
    dom = chromium(tmp_path, f"{ui.url}#/runs/gated", "--dump-dom").stdout
    assert 'class="state RUNNING"' not in dom and '{"Output":"open"}' in dom


def test_experiment_page_shows_trials_and_objective(ui: Any, tmp_path: Path) -> None:
    exp = ui.backend.get("Experiment", "tiny-random")
    trials = [t for t in ui.backend.list("Trial")
              if t["metadata"]["name"].startswith("tiny-random")]
    assert len(trials) == 3
    dom = chromium(tmp_path, f"{ui.url}#/experiments/tiny-random", "--dump-dom").stdout
    assert 'data-view="experiments/tiny-random"' in dom, dom[-2000:]
    for t in trials:
        assert f"<td>{t['metadata']['name']}</td>" in dom
    # the objective chart: uPlot drew its canvas, one value per trial
    assert 'class="uplot' in dom and "<canvas" in dom
    chart = re.search(r'aria-label="loss over trials: ([^;"]+);', dom)
    assert chart and len(chart.group(1).split(", ")) == 3
    best = exp["status"]["currentOptimalTrial"]["bestTrialName"]
    assert f"best trial {best}" in dom
    shot = tmp_path / "experiment-page.png"
    chromium(tmp_path, f"{ui.url}#/experiments/tiny-random", f"--screenshot={shot}",
             "--window-size=1280,800")
    assert shot.exists()
    listing = chromium(tmp_path, f"{ui.url}#/experiments", "--dump-dom").stdout
    assert ">tiny-random</a>" in listing


def test_a_failed_replica_and_its_log(ui: Any, tmp_path: Path) -> None:
    job = ui.backend.get("TFJob", "broken")
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    dom = chromium(tmp_path, f"{ui.url}#/jobs", "--dump-dom").stdout
    assert '<a href="#/jobs/TFJob/broken">broken</a>' in dom and 'class="state Failed"' in dom
    dom = chromium(tmp_path, f"{ui.url}#/jobs/TFJob/broken/worker-0", "--dump-dom").stdout
    assert 'data-view="jobs/TFJob/broken/worker-0"' in dom, dom[-1500:]
    assert ">chief-0</a>" in dom and ">worker-0</a>" in dom
    assert "Log of worker-0" in dom and "loss is nan" in dom


def test_without_the_token_the_page_is_refused(ui: Any, tmp_path: Path) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{ui.host}/")
    assert err.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{ui.host}/ui-api/runs")
    assert err.value.code == 403
    dom = chromium(tmp_path, f"{ui.host}/#/runs/two-adds", "--dump-dom").stdout
    assert "two-adds" not in dom and "token" in dom
    other = urllib.request.Request(f"{ui.url}", headers={"Origin": "http://127.0.0.1:1"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(other)
    assert err.value.code == 403


AXE = Path(__file__).parents[1] / "data" / "vendor" / "axe-core" / "axe.min.js"
RUNNER = Path(__file__).parents[1] / "data" / "webui" / "axe-run.js"


@pytest.fixture(scope="module")
def axe_ui(ui: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same backend served from a copy of the page's files with axe-core (vendored from
    npm, MPL-2.0) added: the shipped page never loads it."""
    from lab.webui.server import STATIC

    static = tmp_path_factory.mktemp("static") / "static"
    shutil.copytree(STATIC, static)
    shutil.copy(AXE, static / "vendor" / "axe.min.js")
    shutil.copy(RUNNER, static / "axe-run.js")
    index = static / "index.html"
    index.write_text(index.read_text().replace(
        "</head>", '<script src="/static/vendor/axe.min.js" defer></script>\n'
                   '<script src="/static/axe-run.js" defer></script>\n</head>'))
    server = UiServer(ui.backend, ui.api.root, static=static).start()
    yield server
    server.stop()


@pytest.mark.parametrize("view", ["runs", "runs/two-adds", "experiments/tiny-random",
                                  "jobs/TFJob/broken/worker-0",
                                  "notebooks"])
def test_views_pass_axe(axe_ui: Any, tmp_path: Path, view: str) -> None:
    import json
    import re

    dom = chromium(tmp_path, f"{axe_ui.url}#/{view}", "--dump-dom").stdout
    found = re.search(r'<pre id="axe-result">(.*?)</pre>', dom, re.S)
    assert found, f"axe did not run on #/{view}: {dom[-1500:]}"
    violations = json.loads(found.group(1).replace("&quot;", '"').replace("&gt;", ">")
                            .replace("&lt;", "<").replace("&amp;", "&"))
    assert violations == [], violations
