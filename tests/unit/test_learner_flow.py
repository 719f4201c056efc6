"""Issue 14 as a learner meets it: failures said as failures, the guided loop (needs, skip,
status, restart, finish summary), output that never cuts a name, kubectl's habits."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from lab.backends import failures
from lab.errors import LabError
from lab.kube import jsonpath, selectors
from lab.kube.conditions import set_condition
from lab.kube.describe import history, render
from lab.term.console import wrap
from lab.term.steps import fit_code_line

DATA = Path(__file__).resolve().parents[1] / "data"
SCEN = {"KFLAB_SCENARIOS": str(DATA / "scenarios")}


# --- a failed resource is failed, with its reason -------------------------------------------

def _job(condition: str, message: str) -> dict:
    status: dict = {}
    set_condition(status, "Created", True, "PyTorchJobCreated", "created")
    set_condition(status, condition, True, f"PyTorchJob{condition}", message)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "default"}, "status": status}


def test_failure_reasons_come_from_the_status_of_every_kind() -> None:
    assert failures.reason(_job("Failed", "1 Master replica(s) failed")) == \
        "Failed: 1 Master replica(s) failed"
    assert failures.reason(_job("Succeeded", "done")) is None
    isvc = {"kind": "InferenceService", "status": {
        "conditions": [{"type": "Ready", "status": "False"}],
        "modelStatus": {"lastFailureInfo": {"reason": "ModelLoadFailed",
                                            "message": "no model file"}}}}
    assert failures.reason(isvc) == "not Ready: ModelLoadFailed: no model file"
    isvc["status"]["conditions"][0]["status"] = "True"  # serving again: not failed
    assert failures.reason(isvc) is None
    run = {"kind": "PipelineRun", "status": {
        "state": "FAILED", "error": {"message": "Inner task failed: 'train'"},
        "run_details": {"task_details": [{"display_name": "make", "state": "SUCCEEDED"},
                                         {"display_name": "train", "state": "FAILED"}]}}}
    assert failures.reason(run) == "run FAILED: task train failed"
    assert failures.reason({"status": {"state": "RUNNING"}}) is None


def test_error_tail_ends_at_the_exception() -> None:
    log = ["Traceback (most recent call last):", '  File "c.py", line 3, in f',
           "    x = pd.read_csv(p)", "        ^^", "NameError: name 'pd' is not defined", "",
           "12:00:01 - INFO - cleanup"]
    assert failures.error_tail(log) == ['File "c.py", line 3, in f', "x = pd.read_csv(p)",
                                        "NameError: name 'pd' is not defined"]
    assert failures.error_tail(["a", "b", "c", "d"], 2) == ["c", "d"]


def test_a_check_on_a_failed_resource_stops_waiting_and_says_why(tmp_path: Path) -> None:
    """A real local store holding a failed PyTorchJob: the check does not wait its 20 s."""
    from lab.backends.local import LocalBackend
    from lab.scenarios import checks
    from lab.scenarios.context import Context
    from lab.scenarios.model import Check

    backend = LocalBackend(str(tmp_path / "state"))
    backend.store.put(_job("Failed", "1 Master replica(s) failed"))
    check = Check("condition", "job must succeed", 20.0,
                  {"kind": "PyTorchJob", "name": "j", "condition": "Succeeded"}, "t:1")
    waits: list[float] = []
    t0 = time.monotonic()
    out = checks.evaluate(check, Context(backend, tmp_path), on_wait=lambda o, w, t:
                          waits.append(w))
    assert time.monotonic() - t0 < 5 and not out.ok and not waits
    assert out.failed and "Failed: 1 Master replica(s) failed" in out.failed
    assert "kflab logs pytorchjob j" in out.failed
    # a resource not there yet is waited for while a kflab process could still create it
    # (here: its owner lock is held, as `kflab apply` holds it), and the wait is reported
    from lab.backends.local import owners

    missing = Check("condition", "m", 1.2, {"kind": "PyTorchJob", "name": "nope",
                                             "condition": "Succeeded"}, "t:2")
    with owners.acquire(backend.root, "PyTorchJob", "default", "nope"):
        out = checks.evaluate(missing, Context(backend, tmp_path),
                              on_wait=lambda o, w, t: waits.append(w))
    assert not out.ok and out.failed is None and waits and waits[-1] < 1.2
    # nothing running: it will not appear on its own, so the check answers at once
    waits.clear()
    out = checks.evaluate(missing, Context(backend, tmp_path),
                          on_wait=lambda o, w, t: waits.append(w))
    assert not out.ok and not waits


def test_a_failed_pipeline_task_shows_its_own_error_everywhere(kflab, state: Path) -> None:
    tiny = str(DATA / "pipelines" / "tiny.py")
    run = kflab("pipeline", "run", tiny, "--name", "bad", "-p", "fail=true")
    assert run.returncode == 1
    assert "task train failed" in run.stderr
    assert "RuntimeError: training diverged (on purpose)" in run.stderr
    assert "kflab logs run bad --task train" in run.stderr
    got = kflab("get", "run", "bad")
    assert "RuntimeError: training diverged" in got.stdout and got.returncode == 0
    task = kflab("logs", "run", "bad", "--task", "train")
    assert "training diverged" in task.stdout and "component `make`" not in task.stdout
    assert kflab("logs", "run", "bad", "--task", "make").stdout.count(
        "Looking for component `make`") == 1
    wrong = kflab("logs", "run", "bad", "--task", "nope")
    assert wrong.returncode == 2 and "its tasks: make, train" in wrong.stderr
    refused = kflab("logs", "run", "bad", "--replica", "worker-1")
    assert refused.returncode == 2 and "--task" in refused.stderr  # never silently ignored
    tail = kflab("logs", "run/bad", "--tail", "2").stdout.splitlines()
    # as kubectl --tail on several pods: the last 2 lines of each task
    assert sorted(line.split("] ")[0] for line in tail) == ["[make", "[make", "[train", "[train"]
    # follow on a finished run prints what there is and returns
    assert "training diverged" in kflab("logs", "run", "bad", "-f", timeout=60).stdout
    described = kflab("describe", "run/bad").stdout
    assert "Warning  TaskFailed" in described and "Failure:" in described


# --- kubectl habits -----------------------------------------------------------------------

def test_jsonpath_templates_as_kubectl_prints_them() -> None:
    data = {"items": [{"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x"}},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                      {"metadata": {"name": "b"}}]}
    assert jsonpath.render("{.items[*].metadata.name}", data) == "a b"
    assert jsonpath.render('{range .items[*]}{.metadata.name}{"\\t"}'
                           '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
                           data) == "a\tTrue\nb\t\n"
    assert jsonpath.render(r"{.items[0].metadata.labels.app\.kubernetes\.io/name}", data) == "x"
    assert jsonpath.render("{.items[0].status}", data) == \
        '{"conditions": [{"type": "Ready", "status": "True"}]}'
    assert jsonpath.render("{.missing}", data) == ""
    for bad in ("{.a", "{range .items[*]}x", "{end}", "{.a[?(}"):
        with pytest.raises(LabError):
            jsonpath.render(bad, data)


def test_label_selectors() -> None:
    objs = [{"metadata": {"labels": {"app": "web", "tier": "front"}}},
            {"metadata": {"labels": {"app": "db"}}}, {"metadata": {}}]

    def names(sel: str) -> list[int]:
        reqs = selectors.parse(sel)
        return [i for i, o in enumerate(objs) if selectors.matches(reqs, o)]

    assert names("app=web") == [0]
    assert names("app!=web") == [1, 2]
    assert names("app in (web, db),!tier") == [1]
    assert names("app notin (web)") == [1, 2]
    assert names("tier") == [0]
    for bad in ("a=b=c", ",", "a in (b", "UP PER=x", "k=" + "v" * 64):
        with pytest.raises(LabError):
            selectors.parse(bad)


def test_describe_layout_and_history() -> None:
    job = _job("Failed", "1 Master replica(s) failed")
    job["spec"] = {"runPolicy": {"backoffLimit": 2}}
    text = render(job, ["Failed: 1 Master replica(s) failed"])
    assert "Name:         j" in text and "Run Policy:" in text and "Backoff Limit:  2" in text
    assert "Warning  PyTorchJobFailed" in text and "Normal   PyTorchJobCreated" in text
    assert [e[2] for e in history(job)] == ["PyTorchJobCreated", "PyTorchJobFailed"]


def test_get_habits(kflab, state: Path, tmp_path: Path) -> None:
    kinds = kflab("get")
    assert kinds.returncode == 0 and "inferenceservices" in kinds.stdout and "isvc" in kinds.stdout
    tiny = str(DATA / "pipelines" / "tiny.py")
    assert kflab("pipeline", "run", tiny, "--name", "t1").returncode == 0
    assert kflab("get", "runs", "-o", "name").stdout.split() == ["pipelinerun.kflab.dev/t1"]
    assert kflab("get", "run/t1", "-o", "jsonpath={.status.state}").stdout == "SUCCEEDED"
    assert "No pipelineruns found" in kflab("get", "runs", "-l", "team=a").stdout
    both = kflab("get", "run", "t1", "nope")
    assert both.returncode == 1 and "t1" in both.stdout and "'nope' not found" in both.stderr
    as_list = json.loads(kflab("get", "run", "t1", "t1", "-o", "json").stdout)
    assert as_list["kind"] == "List"
    assert kflab("get", "runs", "-o", "xml").returncode == 2
    manifest = tmp_path / "run.yaml"
    manifest.write_text("apiVersion: kflab.dev/v1\nkind: PipelineRun\nmetadata: {name: t1}\n"
                        "spec: {pipeline: tiny.py}\n")
    gone = kflab("delete", "-f", str(manifest))
    assert gone.returncode == 0 and "pipelinerun/t1 deleted" in gone.stdout
    again = kflab("delete", "-f", str(manifest))
    assert again.returncode == 1 and "not found" in again.stderr
    assert kflab("delete", "-f", str(manifest), "--ignore-not-found").returncode == 0
    assert kflab("describe", "run", "t1").returncode == 1


# --- output --------------------------------------------------------------------------------

def test_wrap_breaks_only_between_words() -> None:
    text = "error: the file /very/long/path/to/a/manifest-with-a-long-name.yaml was not found"
    lines = wrap(text, 30, "    ").splitlines()
    assert "    /very/long/path/to/a/manifest-with-a-long-name.yaml" in lines
    assert all(w in text.split() for line in lines for w in line.split())
    assert wrap(text, None) == text


@pytest.mark.parametrize("width", [40, 60, 74])
def test_code_lines_fit_without_looking_like_commands(width: int) -> None:
    line = "kflab apply -f pytorchjob.yaml          # streams every replica's output, prefixed"
    out = fit_code_line(line, width, "bash").splitlines()
    assert all(len(x) <= width for x in out)
    assert out[-1] == "kflab apply -f pytorchjob.yaml"
    assert all(x.startswith("# ") for x in out[:-1])  # the comment stays a comment
    long = "python3 train_pipeline.py --vectoriser tfidf --normaliser l2 --alpha 0.3 --x y"
    parts = fit_code_line(long, width, "bash").splitlines()
    assert all(p.endswith(" \\") for p in parts[:-1]) and all(len(p) <= width for p in parts)
    assert " ".join(p.rstrip(" \\").strip() for p in parts) == long
    yaml_line = "      command: [python, gpu_check.py, --out, gpu.json, --size, '8192']"
    assert all(p.startswith(("      command", "      ↪ "))
               for p in fit_code_line(yaml_line, width, "yaml").splitlines())


def test_piped_tables_never_cut_a_name(kflab, state: Path) -> None:
    out = kflab("scenario", "list", env={"COLUMNS": "60"})
    assert "pipeline-classifiers" in out.stdout and "…" not in out.stdout


# --- the guided loop ------------------------------------------------------------------------

NEEDY = """\
id: needy
title: A step this machine cannot run
level: beginner
duration: 1m
steps:
  - id: easy
    title: Write a file
    text: steps/easy.md
    solve:
      - copy: {from: solutions/done.txt, to: done.txt}
    checks:
      - {type: file-exists, path: done.txt, timeout: 0, message: write done.txt}
  - id: big
    title: Needs many GPUs
    text: steps/big.md
    needs:
      - {type: gpus, min: 64, message: "needs 64 GPUs"}
    solve:
      - copy: {from: solutions/done.txt, to: big.txt}
    checks:
      - {type: file-exists, path: big.txt, timeout: 0, message: write big.txt}
"""


@pytest.fixture
def needy(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "scenarios" / "needy"
    (root / "steps").mkdir(parents=True)
    (root / "solutions").mkdir()
    (root / "scenario.yaml").write_text(NEEDY)
    (root / "steps" / "easy.md").write_text("Write `done.txt`.\n")
    (root / "steps" / "big.md").write_text("Use 64 GPUs.\n")
    (root / "solutions" / "done.txt").write_text("done\n")
    return {"KFLAB_SCENARIOS": str(root.parent)}


def test_unmet_needs_are_announced_skippable_and_never_solved(kflab, state: Path,
                                                               tmp_path: Path, needy) -> None:
    work = tmp_path / "w"
    start = kflab("scenario", "start", "needy", "--workdir", str(work), env=needy)
    assert "step 2 (Needs many GPUs) cannot run here: needs 64 GPUs" in start.stdout
    refused = kflab("skip", env=needy)
    assert refused.returncode == 2 and "cannot be skipped" in refused.stderr
    assert kflab("solve", env=needy).returncode == 0
    solve = kflab("solve", env=needy)
    assert solve.returncode == 2 and "kflab skip" in solve.stderr
    assert not (work / "big.txt").exists()  # nothing ran, nothing was weakened
    check = kflab("check", env=needy)
    assert check.returncode == 1 and "kflab skip" in check.stdout
    skipped = kflab("skip", env=needy)
    assert skipped.returncode == 0 and "complete" in skipped.stdout
    assert "1 with kflab solve, 1 skipped" in skipped.stdout
    saved = json.loads((state / "progress" / "needy.json").read_text())
    assert saved["steps"]["big"]["skipped"].startswith("needs 64 GPUs")
    status = kflab("scenario", "status", env=needy).stdout
    assert "solved" in status and "skipped" in status and "complete" in status


def test_status_list_show_restart_and_resume(kflab, state: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert kflab("scenario", "start", "hello-files", cwd=home, env=SCEN).returncode == 0
    work = home / "hello-files"
    assert "1/2" not in kflab("scenario", "list", env=SCEN).stdout
    (work / "greeting.txt").write_text("hello\n")
    assert kflab("check", env=SCEN).returncode == 0
    listing = kflab("scenario", "list", env=SCEN).stdout
    assert "1/2 (active)" in listing
    status = kflab("scenario", "status", env=SCEN).stdout
    assert "1/2 steps done" in status and "Now: step 2" in status and str(work) in status
    shown = kflab("scenario", "show", "hello-files", "--step", "1", env=SCEN)
    assert "step 1/2: Write a greeting" in shown.stdout
    assert kflab("scenario", "show", "hello-files", "--step", "3", env=SCEN).returncode == 2

    # from another folder: resume the saved work folder, never nest a new one
    other = tmp_path / "elsewhere"
    other.mkdir()
    resumed = kflab("scenario", "start", "hello-files", cwd=other, env=SCEN)
    assert "step 2/2" in resumed.stdout and not (other / "hello-files").exists()

    # --restart: the old files are moved aside, the lab starts from its starting files
    again = kflab("scenario", "start", "hello-files", "--restart", cwd=other, env=SCEN)
    kept = home / "hello-files.before-restart"
    assert "step 1/2" in again.stdout and str(kept) in again.stdout
    assert (kept / "greeting.txt").read_text() == "hello\n"
    assert not (work / "greeting.txt").exists() and (work / "count.py").exists()
    assert not (other / "hello-files").exists()
    assert kflab("check", "--wait", "0", env=SCEN).returncode == 1  # the old attempt is gone


def test_finish_summary_names_what_still_runs(kflab, state: Path, tmp_path: Path) -> None:
    """A real model server left running by the lab is named, with the command that stops it."""
    pytest.importorskip("kserve")
    sklearn = pytest.importorskip("sklearn.linear_model")
    import joblib

    root = tmp_path / "scenarios" / "serve"
    (root / "steps").mkdir(parents=True)
    (root / "assets" / "model").mkdir(parents=True)
    x = [[0.0, 1.0], [1.0, 0.0], [0.1, 0.9], [0.9, 0.2]]
    joblib.dump(sklearn.LogisticRegression().fit(x, [0, 1, 0, 1]),
                root / "assets" / "model" / "model.joblib")
    (root / "assets" / "isvc.yaml").write_text(textwrap.dedent("""\
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: tiny}
        spec:
          predictor:
            model:
              modelFormat: {name: sklearn}
              storageUri: file://model
        """))
    (root / "steps" / "s.md").write_text("Serve it.\n")
    (root / "scenario.yaml").write_text(textwrap.dedent("""\
        id: serve
        title: Serve
        level: beginner
        duration: 1m
        steps:
          - id: s
            title: Serve the model
            text: steps/s.md
            solve: [{apply: isvc.yaml}]
            checks:
              - {type: condition, kind: InferenceService, name: tiny, condition: Ready,
                 timeout: 60, message: serve it}
        """))
    env = {"KFLAB_SCENARIOS": str(root.parent)}
    kflab("scenario", "start", "serve", "--workdir", str(tmp_path / "w"), env=env)
    try:
        done = kflab("solve", env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "model server tiny: stop it with kflab delete isvc tiny" in done.stdout
    finally:
        kflab("delete", "isvc", "tiny")
