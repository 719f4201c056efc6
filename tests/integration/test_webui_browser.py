"""`kflab ui` in a real browser: headless Chromium (scripts/standins/50-chromium.sh; skipped
without it) opens each view with the token: a finished run's tasks, graph and artifacts; a run
in progress; a finished Katib experiment's trials and objective chart; a TFJob whose worker
failed, with that replica's log; axe-core on each view; and the page refused without the
token; the guided lab's progress page. Those pages are read with `--dump-dom`, from a copy of
the page that polls instead of holding its event stream open (tests/data/webui/no-stream.js).
The shipped page itself is driven over the DevTools protocol: it follows the state folder
live, and Tab and Enter reach a run and a task. Screenshots land in the tests' tmp dirs.
Nothing is mocked: the pipelines, the experiment and the job run on the local backend (one of
each per module)."""

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

AXE = Path(__file__).parents[1] / "data" / "vendor" / "axe-core" / "axe.min.js"
DATA = Path(__file__).parents[1] / "data" / "webui"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (scripts/standins/50-chromium.sh)")

PIPELINE = """\
from kfp import dsl


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def report(n: int, page: dsl.Output[dsl.HTML], cm: dsl.Output[dsl.ClassificationMetrics],
           notes: dsl.Output[dsl.Markdown], scores: dsl.Output[dsl.Metrics]):
    with open(page.path, "w") as fh:
        # its script tells the page (tests/data/webui/frame-messages.js writes it down)
        # where it runs, whether it can read the UI's cookie and reach the UI's API
        fh.write(f"<h1>Report</h1><p>n is {n}</p>"
                 "<script>let cookie; try { cookie = document.cookie; } catch (e) { "
                 "cookie = 'blocked: ' + e.name; } "
                 "fetch('/ui-api/runs').then(r => 'answered ' + r.status, e => 'refused')"
                 ".then(got => parent.postMessage({origin: String(self.origin), cookie, "
                 "fetch: got}, '*'));</script>")
    cm.log_confusion_matrix(["cat", "dog"], [[n, 1], [2, 7]])
    cm.log_roc_curve([0.0, 0.25, 1.0], [0.0, 0.75, 1.0], [2.0, 0.5, 0.0])
    with open(notes.path, "w") as fh:
        fh.write("# Notes\\n\\n| class | f1 |\\n|---|---|\\n| cat | 0.8 |\\n\\n<b>raw</b>\\n")
    scores.log_metric("accuracy", 0.9)


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
    # the chief outlives the worker's failure (the job then fails and stops it): a chief that
    # ended first would make the job Succeeded, as TFJob's success policy says, on a slow host
    chief = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "tensorflow/tensorflow",
         "command": [sys.executable, "-c", "import time; time.sleep(30); print('ok')"]}]}}}
    worker = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "tensorflow/tensorflow",
         "command": [sys.executable, "-c", "import sys; sys.exit('loss is nan')"]}]}}}
    backend.apply({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
                   "metadata": {"name": "broken"},
                   "spec": {"tfReplicaSpecs": {"Chief": chief, "Worker": worker}}},
                  base_dir=work)
    node = ("import os; print('NODE', os.environ['PET_NODE_RANK'], 'OF', "
            "os.environ['PET_NNODES'])")
    backend.apply({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                   "metadata": {"name": "pets"},
                   "spec": {"runtimeRef": {"name": "torch-distributed"},
                            "trainer": {"numNodes": 2,
                                        "command": [sys.executable, "-c", node]}}},
                  base_dir=work)
    from lab.scenarios import guided, loader

    lab = guided.start(loader.find("katib-hpo"), root, work / "lab", restart=False)
    guided.hint(lab)  # a hint taken on step 1: the Labs view shows it
    server = UiServer(backend, root, static=static_copy(
        tmp_path_factory.mktemp("static") / "static", "no-stream.js",
        "frame-messages.js")).start()
    yield server
    server.stop()


def static_copy(static: Path, *scripts: str) -> Path:
    """A copy of the page's files with test-only scripts from tests/data added before the
    page's own (the shipped page never loads them)."""
    from lab.webui.server import STATIC

    shutil.copytree(STATIC, static)
    tags = ""
    for name in scripts:
        shutil.copy(DATA / name, static / name)
        tags += f'<script src="/static/{name}" defer></script>\n'
    index = static / "index.html"
    index.write_text(index.read_text().replace('<script src="/static/vendor/dagre', tags +
                                               '<script src="/static/vendor/dagre', 1))
    return static


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
    log = chromium(tmp_path, f"{ui.url}#/runs/two-adds/add-2", "--dump-dom").stdout
    assert 'data-view="runs/two-adds/add-2"' in log and '<pre class="log"' in log
    assert "Log of add-2" in log
    shot = tmp_path / "run-page.png"
    out = chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1280,900")
    assert shot.exists() and shot.stat().st_size > 5000, out.stderr[-2000:]


def test_artifacts_as_the_kfp_ui_renders_them(ui: Any, tmp_path: Path,
                                              record_property: Any) -> None:
    """report's outputs, each as KFP's viewers draw it (lab/webui/views.py cites them): the
    ROC curve (uPlot) with its points, the confusion matrix, the scalar metrics, the HTML in
    a frame where its script runs but in an opaque origin (no cookie, no request reaches
    the UI), and the Markdown rendered, raw HTML left as text."""
    import json

    url = f"{ui.url}#/runs/two-adds"
    dom = chromium(tmp_path, url, "--dump-dom", "--window-size=1280,6000").stdout
    main = dom[dom.find("<main"):]
    assert "Visualizations: report" in dom, main
    assert "ROC Curve: report / cm" in dom and 'class="chart roc"' in dom
    roc = dom[dom.find('class="chart roc"'):]
    assert '<div class="uplot' in roc[:3000] and "<canvas" in roc[:3000]
    assert "fpr 0.25 tpr 0.75" in roc[:400]
    assert "<td>0.5</td><td>0.25</td><td>0.75</td>" in dom  # threshold, fpr, tpr
    assert "Confusion Matrix: report / cm" in dom and "<td>9</td><td>1</td>" in dom
    assert "Scalar Metrics: report / scores" in dom and "<td>accuracy</td><td>0.9</td>" in dom
    html = re.search(r'<iframe src="([^"]+)" sandbox="allow-scripts"', dom)
    md = re.search(r'<iframe src="([^"]+)" sandbox=""', dom)
    assert html and md, main
    # the HTML's script ran in an opaque origin: no cookie, its request to the UI refused
    said = re.search(r'<pre id="frame-messages">(.*?)</pre>', dom, re.S)
    assert said, "the HTML artifact's script did not report"
    msg = json.loads(said.group(1).replace("&quot;", '"').splitlines()[0])
    assert msg["from"] == "null" and msg["data"]["origin"] == "null", msg
    assert msg["data"]["cookie"].startswith("blocked") and msg["data"]["fetch"] == "refused"
    cookie = {"Cookie": f"{ui.cookie('token')}={ui.token}"}
    page = urllib.request.urlopen(urllib.request.Request(ui.host + html.group(1),
                                                         headers=cookie))
    assert b"<p>n is 9</p>" in page.read()
    assert page.headers["Content-Security-Policy"].startswith("sandbox allow-scripts;")
    page = urllib.request.urlopen(urllib.request.Request(ui.host + md.group(1), headers=cookie))
    body = page.read()
    assert b"<h1>Notes</h1>" in body and b"<td>0.8</td>" in body
    assert b"&lt;b&gt;raw&lt;/b&gt;" in body
    assert "script-src" not in page.headers["Content-Security-Policy"]
    shot = tmp_path / "run-artifacts.png"
    chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1280,2600")
    assert shot.exists() and shot.stat().st_size > 5000
    record_property("screenshot", str(shot))


def test_a_trainjob_its_nodes_and_a_log(ui: Any, tmp_path: Path,
                                        record_property: Any) -> None:
    """A Kubeflow Trainer v2 TrainJob in the jobs view: listed with the PyTorchJobs and
    TFJobs, its page shows the runtime, each node's pod and phase, jobsStatus, and a node's
    log."""
    job = ui.backend.get("TrainJob", "pets")
    assert job["status"]["conditions"][-1]["type"] == "Complete"
    dom = chromium(tmp_path, f"{ui.url}#/jobs", "--dump-dom").stdout
    assert '<a href="#/jobs/TrainJob/pets">pets</a>' in dom, dom[-1500:]
    assert 'class="state Complete"' in dom
    url = f"{ui.url}#/jobs/TrainJob/pets/node-1"
    dom = chromium(tmp_path, url, "--dump-dom").stdout
    assert 'data-view="jobs/TrainJob/pets/node-1"' in dom, dom[-1500:]
    assert "runtime torch-distributed · 2 node(s)" in dom
    for i in (0, 1):
        assert f">node-{i}</a></td><td>pets-node-0-{i}</td>" in dom
    assert dom.count('class="state Succeeded"') == 2
    assert "<td>node</td><td>0</td><td>0</td><td>1</td><td>0</td><td>0</td>" in dom  # jobsStatus
    assert "Log of node-1" in dom and "NODE 1 OF 2" in dom
    shot = tmp_path / "trainjob.png"
    chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1280,900")
    assert shot.exists() and shot.stat().st_size > 5000
    record_property("screenshot", str(shot))


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
        assert 'class="state RUNNING"' in dom, dom[-1500:]
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
    for t in trials:  # each trial links to its own page
        name = t["metadata"]["name"]
        assert f'<a href="#/experiments/tiny-random/trial/{name}">{name}</a>' in dom
    # the objective chart: uPlot drew its canvas, one value per trial
    assert 'class="uplot' in dom and "<canvas" in dom
    chart = re.search(r'aria-label="loss over trials: ([^;"]+);', dom)
    assert chart and len(chart.group(1).split(", ")) == 3
    best = exp["status"]["currentOptimalTrial"]["bestTrialName"]
    assert f"best trial {best}" in dom
    # parallel coordinates: an axis per parameter (x, n) and the objective, a line per trial,
    # the best one drawn thick; each line crosses the axes at the trial's values
    coords = dom[dom.find('<svg class="parcoords"'):]
    coords = coords[:coords.find("</svg>")]
    assert coords.count('class="axis"') == 3 and coords.count("<polyline") == 3, coords
    assert coords.count('class="trial best"') == 1
    # the lowest loss (the goal is minimize) sits at the foot of the objective axis (y 252)
    best_line = re.search(r'class="trial best" points="([^"]+)"', coords)
    assert best_line and best_line.group(1).split()[-1].endswith(",252"), coords
    assert '>n</text>' in coords and '>x</text>' in coords and '>loss</text>' in coords
    shot = tmp_path / "experiment-page.png"
    chromium(tmp_path, f"{ui.url}#/experiments/tiny-random", f"--screenshot={shot}",
             "--window-size=1280,1100")
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


def test_guided_lab_progress_page(ui: Any, tmp_path: Path) -> None:
    dom = chromium(tmp_path, f"{ui.url}#/labs", "--dump-dom").stdout
    assert '<a href="#/labs/katib-hpo">katib-hpo</a>' in dom, dom[-1500:]
    dom = chromium(tmp_path, f"{ui.url}#/labs/katib-hpo", "--dump-dom").stdout
    assert 'data-view="labs/katib-hpo"' in dom, dom[-1500:]
    assert '<span class="step current">current</span>' in dom and "1 of " in dom
    shot = tmp_path / "lab-progress.png"
    chromium(tmp_path, f"{ui.url}#/labs/katib-hpo", f"--screenshot={shot}",
             "--window-size=1280,800")
    assert shot.exists()


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




@pytest.fixture(scope="module")
def axe_ui(ui: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same backend served from a copy of the page's files with axe-core (vendored from
    npm, MPL-2.0) added after the page's scripts: the shipped page never loads it."""
    static = static_copy(tmp_path_factory.mktemp("static") / "static", "no-stream.js")
    shutil.copy(AXE, static / "vendor" / "axe.min.js")
    shutil.copy(DATA / "axe-run.js", static / "axe-run.js")
    index = static / "index.html"
    index.write_text(index.read_text().replace(
        "</head>", '<script src="/static/vendor/axe.min.js" defer></script>\n'
                   '<script src="/static/axe-run.js" defer></script>\n</head>'))
    server = UiServer(ui.backend, ui.api.root, static=static).start()
    yield server
    server.stop()


@pytest.mark.parametrize("view", ["runs", "runs/two-adds", "experiments/tiny-random",
                                  "jobs/TFJob/broken/worker-0", "jobs/TrainJob/pets/node-1",
                                  "notebooks", "labs", "labs/katib-hpo"])
def test_views_pass_axe(axe_ui: Any, tmp_path: Path, view: str) -> None:
    import json
    import re

    dom = chromium(tmp_path, f"{axe_ui.url}#/{view}", "--dump-dom").stdout
    found = re.search(r'<pre id="axe-result">(.*?)</pre>', dom, re.S)
    assert found, f"axe did not run on #/{view}: {dom[-1500:]}"
    violations = json.loads(found.group(1).replace("&quot;", '"').replace("&gt;", ">")
                            .replace("&lt;", "<").replace("&amp;", "&"))
    assert violations == [], violations


class Cdp:
    """Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
    messages ending in NUL on fds 3 and 4), for what `--dump-dom` cannot do: a page that stays
    open (the live event stream) and key presses."""

    def __init__(self, tmp_path: Path) -> None:
        import json
        import select

        self._json, self._select = json, select
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()
        profile = tmp_path / "cdp-profile"
        profile.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3); "
             "os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])",
             str(to_r), str(from_w), str(CHROMIUM), "--headless", "--no-sandbox",
             "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--window-size=1280,900", "about:blank"],
            pass_fds=(to_r, from_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf, self._id, self.session = b"", 0, None
        page = next(t for t in self.call("Target.getTargets")["targetInfos"]
                    if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]

    def call(self, method: str, **params: Any) -> Any:
        import time

        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._to, self._json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = self._json.loads(raw)
                if reply.get("id") == self._id:
                    assert "error" not in reply, reply
                    return reply.get("result")
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {method}"
            if self._select.select([self._from], [], [], left)[0]:
                chunk = os.read(self._from, 65536)
                assert chunk, "chromium closed the pipe"
                self._buf += chunk

    def js(self, expression: str, wait: bool = False) -> Any:
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=wait)
        return out["result"].get("value")

    def until(self, expression: str, timeout: float = 15) -> Any:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"never true: {expression}")

    def key(self, name: str, code: int) -> None:
        extra = {"text": "\r"} if name == "Enter" else {}
        self.call("Input.dispatchKeyEvent", type="keyDown", key=name, code=name,
                  windowsVirtualKeyCode=code, **extra)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=name, code=name,
                  windowsVirtualKeyCode=code)

    def tab_to(self, selector: str, most: int = 60) -> None:
        """Press Tab until the focused element matches `selector`."""
        for _ in range(most):
            self.key("Tab", 9)
            if self.js(f"document.activeElement.matches({self._json.dumps(selector)})"):
                return
        raise AssertionError(f"Tab never reached {selector}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to)
        os.close(self._from)


# the href of a run's link in the runs list, found by the run's name ("" until it is drawn)
RUN_LINK = ("[...document.querySelectorAll('#main td a')].find(a => a.textContent === '%s')"
            "?.getAttribute('href') || ''")


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    cdp = Cdp(tmp_path)
    yield cdp
    cdp.close()


@pytest.fixture
def live_ui(ui: Any) -> Any:
    """The shipped page (with its event stream), on the same backend."""
    server = UiServer(ui.backend, ui.api.root).start()
    yield server
    server.stop()


def test_the_page_follows_the_state_folder_without_reloading(live_ui: Any,
                                                            browser: Any) -> None:
    """The shipped page, open in Chromium: a run recorded while it is open appears through
    the event stream (one stream, no reload, no polling), and the keyboard focus stays on
    the link it was on."""
    browser.call("Page.navigate", url=f"{live_ui.url}#/runs")
    browser.until("document.getElementById('main').dataset.view === 'runs'")
    two = browser.until(RUN_LINK % "two-adds")  # the runs list links KFP's way, by run id
    browser.js("window.sameDocument = true; "
               f"document.querySelector('a[href=\"{two}\"]').focus()")
    import time

    deadline = time.monotonic() + 10
    while live_ui.watcher.clients != 1 and time.monotonic() < deadline:
        time.sleep(0.1)  # the page's event stream is open
    assert live_ui.watcher.clients == 1
    name = "appeared-live"
    live_ui.backend.store.put({"apiVersion": "kflab.dev/v1", "kind": "PipelineRun",
                               "metadata": {"name": name, "namespace": "default",
                                            "creationTimestamp": "2099-01-01T00:00:00Z"},
                               "spec": {}, "status": {"state": "RUNNING"}})
    try:
        browser.until(RUN_LINK % name)
        assert browser.js("window.sameDocument") is True  # drawn in place: no reload
        assert browser.js("document.activeElement.getAttribute('href')") == two
        assert live_ui.watcher.clients == 1  # still the one stream
    finally:
        live_ui.backend.store.delete("PipelineRun", name)


def test_keyboard_reaches_a_run_and_a_task(live_ui: Any, browser: Any) -> None:
    """Tab reaches the run's link in the list, Enter opens the run; Tab reaches a task's box
    in the graph, Enter opens that task's side panel, which takes the focus, with its log."""
    browser.call("Page.navigate", url=f"{live_ui.url}#/runs")
    browser.until("document.getElementById('main').dataset.view === 'runs'")
    href = browser.until(RUN_LINK % "two-adds")
    rid = href.rsplit("/", 1)[1]
    browser.tab_to(f'a[href="{href}"]')
    browser.key("Enter", 13)
    browser.until(f"document.getElementById('main').dataset.view === 'runs/details/{rid}'")
    browser.tab_to(f'svg a[href="{href}/add-2"]')
    browser.key("Enter", 13)
    browser.until(f"document.getElementById('main').dataset.view === 'runs/details/{rid}/add-2'")
    assert "Log of add-2" in browser.js("document.getElementById('log').textContent")
    assert browser.js("document.activeElement.id") == "panel-h"  # the panel has the focus
    assert browser.js("document.querySelector('svg a.selected').getAttribute('aria-current')") \
        == "true"


def test_the_launch_file_leaves_no_token_or_code_in_the_address_bar_or_history(
        tmp_path: Path) -> None:
    """Issue 34, Why #3: `kflab ui` opens the browser on its 0600 launch file. In Chromium
    that file sends the page to `/?code=...`; the page works (the cookie came with it) and
    its first script takes the code out of the address bar and the history entry (the code
    is spent anyway). The URL with the token that `kflab ui` prints, opened by hand, is
    stripped the same way."""
    root = tmp_path / "state"
    root.mkdir()
    server = UiServer(LocalBackend(str(root)), root).start()
    cdp = Cdp(tmp_path)
    try:
        opener = server.launch_file(root / "ui")
        assert oct(opener.stat().st_mode)[-3:] == "600"
        code = opener.read_text().split("code=", 1)[1].split('"', 1)[0]
        cdp.call("Page.navigate", url=opener.as_uri())
        cdp.until("location.protocol === 'http:' && document.getElementById('main') !== null"
                  " && document.getElementById('main').dataset.view === 'runs'")
        cdp.until("document.querySelector('main table') !== null")  # the API answered
        for url in (cdp.js("location.href"),
                    *(e["url"] for e in cdp.call("Page.getNavigationHistory")["entries"])):
            assert "code=" not in url and "token=" not in url, url
        cdp.call("Page.navigate", url=f"{server.url}#/runs")
        cdp.until("location.search === '' && "
                  "document.getElementById('main').dataset.view === 'runs'")
        entries = cdp.call("Page.getNavigationHistory")["entries"]
        assert not [e["url"] for e in entries if server.token in e["url"]], entries
        assert not [e["url"] for e in entries if "code=" in e["url"]], entries
        assert not server.redeem(code)  # the page spent it: the file opens nothing now
    finally:
        cdp.close()
        server.stop()
