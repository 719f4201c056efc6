"""Experiments run end to end on the local backend with real trial processes (tiny Python
scripts, no ML stack), checked through the same status shape a cluster reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from crds import crd_schema, schema_errors
from katib_status_schema import EXPERIMENT_STATUS, TRIAL_STATUS
from tuning_helpers import TRIAL, container, experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.procs import is_running
from tests.conftest import SHARED, need_upstream

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(str(tmp_path / "state"))


def apply(backend: LocalBackend, obj: dict, folder: Path, trial: str = TRIAL) -> dict:
    write(folder, "trial.py", trial)
    return backend.apply(obj, base_dir=folder)


def trials_of(backend: LocalBackend) -> list[dict[str, Any]]:
    return backend.list("Trial")


def last(obj: dict) -> tuple[str, str]:
    cond = obj["status"]["conditions"][-1]
    return cond["type"], cond["reason"]


def validate(obj: dict, schema: dict) -> None:
    """Katib's status rules (strict schema from its Go types), then the upstream CRD's own
    schema as a cluster would apply it (skips without the upstream test data)."""
    assert schema_errors(schema, obj["status"]) == []
    need_upstream()
    assert schema_errors(crd_schema(SHARED, obj["kind"]), obj) == []


def test_random_experiment_end_to_end(backend: LocalBackend, tmp_path: Path) -> None:
    events: list[dict] = []
    backend.sink = events.append
    exp = apply(backend, experiment(), tmp_path)
    assert last(exp) == ("Succeeded", "ExperimentMaxTrialsReached")
    status = exp["status"]
    assert status["trials"] == status["trialsSucceeded"] == 4
    trials = trials_of(backend)
    assert len(trials) == 4  # one Trial object per trial
    best = min(trials, key=lambda t: float(t["status"]["observation"]["metrics"][0]["min"]))
    assert status["currentOptimalTrial"]["bestTrialName"] == best["metadata"]["name"]
    for t in trials:
        values = {a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]}
        x, n = float(values["x"]), int(values["n"])
        assert 0 <= x <= 1 and 1 <= n <= 3
        want = (x - 0.5) ** 2 + n / 10
        assert float(t["status"]["observation"]["metrics"][0]["latest"]) == \
            pytest.approx(want, abs=1e-5)
        assert t["metadata"]["labels"]["katib.kubeflow.org/experiment"] == "exp"
        validate(t, TRIAL_STATUS)
        log = list(backend.logs("Trial", t["metadata"]["name"]))
        assert log == [f"loss={want:.6f}"]
    validate(backend.get("Experiment", "exp"), EXPERIMENT_STATUS)
    plots = exp["metadata"]["annotations"]["kflab.dev/plots"].split(",")
    assert [Path(p).name for p in plots] == ["objective.png", "importance.png"]
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in plots)
    kinds = [e["event"] for e in events]
    assert kinds.count("trial-started") == kinds.count("trial-finished") == 4
    assert kinds[-1] == "experiment-finished"
    assert any("image" in e.get("text", "") for e in events if e["event"] == "message")


def test_parallel_trial_count_is_a_ceiling(backend: LocalBackend, tmp_path: Path) -> None:
    trial = TRIAL + """
import pathlib
pathlib.Path(os.environ["KATIB_TRIAL_NAME"] + ".run").write_text(str(time.time()))
time.sleep(0.4)
running = len(list(pathlib.Path('.').glob('*.run')))
print(f"concurrent={running}")
pathlib.Path(os.environ["KATIB_TRIAL_NAME"] + ".run").unlink()
"""
    obj = experiment(maxTrialCount=6, parallelTrialCount=2)
    obj["spec"]["objective"]["additionalMetricNames"] = ["concurrent"]
    apply(backend, obj, tmp_path, trial)
    seen = [int(t["status"]["observation"]["metrics"][1]["latest"])
            for t in trials_of(backend)]
    assert max(seen) <= 2 and len(seen) == 6
    assert max(seen) == 2  # it does run two at a time


def test_crashing_and_silent_trials_fail_the_experiment(backend: LocalBackend,
                                                        tmp_path: Path) -> None:
    trial = """
import sys
x = float(sys.argv[1].split("=")[1])
if x < 0.5:
    raise SystemExit(3)          # a crash
print("training done, forgot to print the metric")
"""
    obj = experiment(maxTrialCount=6, maxFailedTrialCount=2, parallelTrialCount=1)
    exp = apply(backend, obj, tmp_path, trial)
    assert last(exp) == ("Failed", "ExperimentFailed")
    trials = trials_of(backend)
    assert len(trials) == 2  # stopped as soon as the failed count reached the maximum
    states = sorted(t["status"]["conditions"][-1]["type"] for t in trials)
    assert set(states) <= {"Failed", "MetricsUnavailable"}
    failed = exp["status"].get("trialsFailed", 0) + exp["status"].get(
        "trialMetricsUnavailable", 0)
    assert failed == 2
    for t in trials:
        validate(t, TRIAL_STATUS)
    validate(exp, EXPERIMENT_STATUS)


def test_a_metric_name_in_another_case_gets_a_did_you_mean(backend: LocalBackend,
                                                            tmp_path: Path) -> None:
    obj = experiment(maxTrialCount=1, maxFailedTrialCount=1, parallelTrialCount=1)
    obj["spec"]["objective"]["objectiveMetricName"] = "Loss"
    apply(backend, obj, tmp_path, 'print("loss=0.25")')
    (trial,) = trials_of(backend)
    message = trial["status"]["conditions"][-1]["message"]
    assert "'Loss' never appeared in the output; did you mean 'loss'?" in message, message


def test_missing_command_counts_as_failed(backend: LocalBackend, tmp_path: Path) -> None:
    obj = experiment(maxTrialCount=2, maxFailedTrialCount=1, parallelTrialCount=1)
    container(obj)["command"] = ["no-such-program-kflab", "--x=${trialParameters.x}",
                                 "--n=${trialParameters.n}"]
    exp = apply(backend, obj, tmp_path)
    assert last(exp) == ("Failed", "ExperimentFailed")
    t = trials_of(backend)[0]
    assert "command not found" in t["status"]["conditions"][-1]["message"]


def test_grid_runs_every_point_then_suggestion_end(backend: LocalBackend,
                                                   tmp_path: Path) -> None:
    obj = experiment(algorithm={"algorithmName": "grid"}, maxTrialCount=None,
                     parameters=[{"name": "x", "parameterType": "double",
                                  "feasibleSpace": {"min": "0", "max": "1", "step": "0.5"}},
                                 {"name": "n", "parameterType": "discrete",
                                  "feasibleSpace": {"list": ["1", "2"]}}])
    exp = apply(backend, obj, tmp_path)
    assert last(exp) == ("Succeeded", "ExperimentSuggestionEndReached")
    points = sorted(tuple(a["value"] for a in t["spec"]["parameterAssignments"])
                    for t in trials_of(backend))
    # doubles written as Katib's grid writes them: str() of numpy.arange's floats
    assert points == [("0.0", "1"), ("0.0", "2"), ("0.5", "1"), ("0.5", "2"), ("1.0", "1"),
                      ("1.0", "2")]
    best = exp["status"]["currentOptimalTrial"]["parameterAssignments"]
    assert best == [{"name": "x", "value": "0.5"}, {"name": "n", "value": "1"}]
    assert "katib.grid.end" in exp["metadata"]["annotations"]["kflab.dev/local-differences"]


def test_goal_stops_the_experiment(backend: LocalBackend, tmp_path: Path) -> None:
    obj = experiment(maxTrialCount=30, parallelTrialCount=1)
    obj["spec"]["objective"]["goal"] = 10.0  # every loss is below: the first trial wins
    exp = apply(backend, obj, tmp_path)
    assert last(exp) == ("Succeeded", "ExperimentGoalReached")
    assert exp["status"]["trials"] == 1


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe", "cmaes", "sobol",
                                       "bayesianoptimization"])
def test_every_supported_algorithm_runs(backend: LocalBackend, tmp_path: Path,
                                        algorithm: str) -> None:
    obj = experiment(algorithm={"algorithmName": algorithm, "algorithmSettings": [
        {"name": "random_state", "value": "3"}]}, maxTrialCount=3, parallelTrialCount=3)
    exp = apply(backend, obj, tmp_path)
    assert last(exp) == ("Succeeded", "ExperimentMaxTrialsReached")
    assert exp["status"]["trialsSucceeded"] == 3


def test_shell_metacharacters_are_passed_literally(backend: LocalBackend,
                                                   tmp_path: Path) -> None:
    nasty = ["a; touch pwned", "$(touch pwned2)", "`touch pwned3` | cat > x", "'\"*&"]
    obj = experiment(maxTrialCount=4, parallelTrialCount=1, algorithm={"algorithmName": "grid"},
                     parameters=[{"name": "s", "parameterType": "categorical",
                                  "feasibleSpace": {"list": nasty}}])
    obj["spec"]["trialTemplate"]["trialParameters"] = [{"name": "s", "reference": "s"}]
    container(obj)["command"] = [sys.executable, "trial.py", "${trialParameters.s}"]
    container(obj)["env"] = [{"name": "TRIAL_SECRET", "value": "v=${trialParameters.s}"}]
    trial = """
import json, os, sys
with open(os.environ["KATIB_TRIAL_NAME"] + ".json", "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": os.environ["TRIAL_SECRET"]}, fh)
print("loss=1")
"""
    exp = apply(backend, obj, tmp_path, trial)
    assert exp["status"]["trialsSucceeded"] == 4
    got = sorted(json.loads(p.read_text())["argv"][0] for p in tmp_path.glob("exp-*.json"))
    assert got == sorted(nasty)
    envs = sorted(json.loads(p.read_text())["env"] for p in tmp_path.glob("exp-*.json"))
    assert envs == sorted(f"v={s}" for s in nasty)
    assert not list(tmp_path.glob("pwned*")) and not (tmp_path / "x").exists()


def test_file_collector_text_and_json(backend: LocalBackend, tmp_path: Path) -> None:
    trial = """
import json, sys
x = float(sys.argv[1].split("=")[1])
with open("out/metrics.json", "a") as fh:
    for step in range(3):
        stamp = "2024-01-01T00:00:0%dZ" % step
        # Katib's JSON collector reads string values only: "0.3", not 0.3
        fh.write(json.dumps({"loss": str(x + step), "timestamp": stamp}) + "\\n")
print("loss=999")  # stdout is not the collector here
"""
    obj = experiment(maxTrialCount=2, parallelTrialCount=2, metricsCollectorSpec={
        "collector": {"kind": "File"},
        "source": {"fileSystemPath": {"path": "out/metrics.json", "kind": "File",
                                      "format": "JSON"}}})
    exp = apply(backend, obj, tmp_path, trial)
    assert exp["status"]["trialsSucceeded"] == 2
    for t in trials_of(backend):
        x = float(t["spec"]["parameterAssignments"][0]["value"])
        m = t["status"]["observation"]["metrics"][0]
        assert float(m["min"]) == pytest.approx(x) and float(m["latest"]) == pytest.approx(x + 2)
    notes = exp["metadata"]["annotations"]["kflab.dev/local-differences"]
    assert "katib.collector.file-parallel" in notes  # parallel 2: serialised, and said so


def test_median_stop_early_stops_bad_trials(backend: LocalBackend, tmp_path: Path) -> None:
    """Real trial processes, Katib's rule (tuning/earlystop.py): the k-th trial started
    reports the k-th row of REPORTS; a trial to be stopped lingers, so only early stopping
    ends it soon. min_trials_required 3, start_step 2, minimize."""
    reports = [[2.1, 1.6, 1.4], [2.2, 1.7, 1.5], [2.3, 1.8, 1.6],  # succeed: rule 1.95
               [10.5, 10.0, 9.8],   # best by report 2 is 10.0 > 1.95: stopped
               [1.5, 1.0, 0.8],     # 1.0 < 1.95: runs on, succeeds (rule is now 1.775)
               [1.9, 1.7, 4.0],     # best by report 2 1.7 < 1.775: never stopped later
               [2.6, 2.1, 0.1]]     # 2.1 > (1.85+1.95+2.05+1.25+1.8)/5 = 1.78: stopped
    stop = {3, 6}
    trial = f"""
import os, pathlib, time
counter = pathlib.Path("counter")
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
pathlib.Path(os.environ["KATIB_TRIAL_NAME"] + ".k").write_text(str(k))
for value in {reports}[k]:
    print(f"loss={{value}}", flush=True)
    time.sleep(0.3)
time.sleep(30 if k in {stop} else 0)
"""
    obj = experiment(maxTrialCount=7, parallelTrialCount=1,
                     earlyStopping={"algorithmName": "medianstop", "algorithmSettings": [
                         {"name": "min_trials_required", "value": "3"},
                         {"name": "start_step", "value": "2"}]})
    t0 = time.monotonic()
    exp = apply(backend, obj, tmp_path, trial)
    assert time.monotonic() - t0 < 25  # the lingering trials were stopped, not waited for
    ordered = sorted(trials_of(backend), key=lambda t: int(
        (tmp_path / f"{t['metadata']['name']}.k").read_text()))
    states = [t["status"]["conditions"][-1]["type"] for t in ordered]
    assert states == ["Succeeded", "Succeeded", "Succeeded", "EarlyStopped", "Succeeded",
                      "Succeeded", "EarlyStopped"]
    assert exp["status"]["trialsEarlyStopped"] == 2
    rule = ordered[3]["spec"]["earlyStoppingRules"][0]
    assert rule == {"name": "loss", "value": "1.95", "comparison": "greater", "startStep": 2}
    assert "earlyStoppingRules" not in ordered[2]["spec"]  # only 2 had succeeded by then
    validate(ordered[3], TRIAL_STATUS)


def test_reapply_replaces_trials_and_delete_removes_them(backend: LocalBackend,
                                                         tmp_path: Path) -> None:
    apply(backend, experiment(maxTrialCount=2), tmp_path)
    apply(backend, experiment(maxTrialCount=3), tmp_path)
    assert len(trials_of(backend)) == 3
    assert backend.delete("Experiment", "exp")
    assert trials_of(backend) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_ctrl_c_kills_every_trial_and_marks_the_experiment(tmp_path: Path, sig: int) -> None:
    """A real `kflab apply` gets SIGINT (Ctrl-C), SIGTERM or SIGHUP (closed terminal) while
    two trials run, each with a grandchild of its own: all are stopped, the status names
    the signal, the exit code is 128 + the signal."""
    trial = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(os.environ["KATIB_TRIAL_NAME"] + ".pids", "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""
    write(tmp_path, "trial.py", trial)
    obj = experiment(maxTrialCount=4, parallelTrialCount=2)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(obj))
    state = tmp_path / "state"
    env = {**os.environ, "KFLAB_STATE": str(state), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "apply", "-f", "exp.yaml"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.pids"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p) for f in tmp_path.glob("*.pids") for p in f.read_text().split()]
    assert len(pids) == 4, proc.stdout
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, out
    time.sleep(0.2)
    assert [p for p in pids if is_running(p)] == []  # no orphan, grandchildren included
    backend = LocalBackend(str(state))
    exp = backend.get("Experiment", "exp")
    assert exp is not None
    assert last(exp) == ("Failed", "ExperimentFailed")
    assert signal.Signals(sig).name in exp["status"]["conditions"][-1]["message"]
    assert exp["status"]["trialsKilled"] == 2
    assert all(t["status"]["conditions"][-1]["type"] == "Killed"
               for t in backend.list("Trial"))


def test_unusable_metrics_file_path_fails_the_trial(backend: LocalBackend,
                                                    tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    obj = experiment(maxTrialCount=2, maxFailedTrialCount=1, parallelTrialCount=1,
                     metricsCollectorSpec={"collector": {"kind": "File"}, "source": {
                         "fileSystemPath": {"path": "blocker/metrics.log", "kind": "File"}}})
    exp = apply(backend, obj, tmp_path)
    assert last(exp) == ("Failed", "ExperimentFailed")
    assert "cannot prepare the metrics file" in \
        trials_of(backend)[0]["status"]["conditions"][-1]["message"]


def test_cli_get_describe_and_logs(tmp_path: Path) -> None:
    write(tmp_path, "trial.py", TRIAL)
    obj = experiment(maxTrialCount=2)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(obj))
    env = {**os.environ, "KFLAB_STATE": str(tmp_path / "state"), "PYTHONPATH": str(REPO),
           "COLUMNS": "200"}

    def kflab(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    out = kflab("apply", "-f", "exp.yaml")
    assert "experiment/exp Succeeded" in out
    assert "ExperimentMaxTrialsReached" in out and "objective.png" in out
    rows = kflab("get", "trials").splitlines()[1:]
    assert len(rows) == 2 and all("Succeeded" in r and " exp " in r for r in rows)
    assert "Succeeded" in kflab("get", "experiments")
    # describe is kubectl's layout (not YAML); -o yaml is the object
    assert "Trials Succeeded:  2" in kflab("describe", "experiment", "exp")
    assert yaml.safe_load(kflab("get", "experiment", "exp", "-o", "yaml"))["status"][
        "trialsSucceeded"] == 2
    name = rows[0].split()[0]
    assert kflab("logs", "trial", name).startswith("loss=")
    assert sum(line.startswith("[exp-") for line in
               kflab("logs", "experiment", "exp").splitlines()) == 2


def test_progress_table_renders_trials() -> None:
    from lab.term.trials import TrialTable

    table = TrialTable({"experiment": "e", "algorithm": "tpe", "parallel": 2, "max_trials": 3,
                        "metric": "loss", "params": ["x"]}, lambda: "0.0s")
    table.update({"event": "trial-started", "trial": "e-1", "params": {"x": "0.5"}})
    table.update({"event": "trial-finished", "trial": "e-1", "state": "Succeeded",
                  "objective": "0.25", "seconds": 1.0, "detail": ""})
    lines = _text(table.render()).splitlines()
    assert lines[0].split() == ["TRIAL", "STATE", "LOSS", "TIME", "X"]
    assert lines[1].split() == ["e-1", "Succeeded", "0.25", "1.0s", "0.5"] and len(lines) == 2


def _text(renderable: object, width: int = 80) -> str:
    import io

    from rich.console import Console

    out = Console(file=io.StringIO(), width=width, color_system=None)
    out.print(renderable)
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_progress_table_fits_80_columns_with_long_names_and_numbers() -> None:
    """Long trial names and 14-digit parameters: the row keeps name, state, value and time
    whole on one line; parameters (4 significant digits) go on a line beneath."""
    from lab.term.trials import TrialTable

    table = TrialTable({"experiment": "e", "algorithm": "tpe", "parallel": 2, "max_trials": 3,
                        "metric": "accuracy", "params": ["learning_rate", "weight_decay"]},
                       lambda: "0.0s")
    name = "a-rather-long-experiment-name-8093112c"
    table.update({"event": "trial-started", "trial": name,
                  "params": {"learning_rate": "0.0551247104672",
                             "weight_decay": "0.00708439674795"}})
    table.update({"event": "trial-finished", "trial": name, "state": "MetricsUnavailable",
                  "objective": None, "seconds": 12.25, "detail": ""})
    lines = _text(table.render(), 80).splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[1].split() == [name, "MetricsUnavailable", "12.2s"]
    assert lines[2].split() == ["learning_rate=0.05512", "weight_decay=0.007084"]


def test_progress_table_keeps_only_the_newest_rows() -> None:
    from lab.term.trials import TrialTable

    table = TrialTable({"experiment": "e", "algorithm": "random", "parallel": 1,
                        "max_trials": 40, "metric": "loss", "params": []}, lambda: "0.0s")
    for i in range(TrialTable.MAX_ROWS + 5):
        table.update({"event": "trial-started", "trial": f"e-{i}", "params": {}})
    lines = _text(table.render()).splitlines()
    assert len(lines) == 1 + TrialTable.MAX_ROWS + 1  # header, rows, what was left out
    assert "5 earlier trials" in lines[-1]


REWRITER = """
import json, sys
n = int(sys.argv[1].split("=")[1])
path = sys.argv[2]
for step in range(2):  # rewritten each time (mode "w"), longer for a larger n
    with open(path, "w") as fh:
        fh.write(json.dumps({"score": str(n), "pad": "x" * 10 * n}) + "\\n")
"""


def _rewriter_experiment(path: Path) -> dict:
    obj = experiment(
        objective={"type": "maximize", "objectiveMetricName": "score"},
        algorithm={"algorithmName": "grid"}, maxTrialCount=3, parallelTrialCount=1,
        parameters=[{"name": "n", "parameterType": "int",
                     "feasibleSpace": {"min": "1", "max": "3"}}],
        metricsCollectorSpec={"collector": {"kind": "File"}, "source": {
            "fileSystemPath": {"path": str(path), "kind": "File", "format": "JSON"}}})
    obj["spec"]["trialTemplate"]["trialParameters"] = [{"name": "n", "reference": "n"}]
    container(obj)["command"] = [sys.executable, "trial.py", "--n=${trialParameters.n}",
                                 str(path)]
    return obj


def test_file_collector_outside_the_folder_gives_each_trial_its_own_file(
        backend: LocalBackend, tmp_path: Path) -> None:
    """Regression (issue 23, points 1 and 2): the collector's folder outside the manifest's
    folder does not exist (Katib mounts it in each pod, like /katib): it is created; each
    trial starts without the previous trial's file, and the result is what the file holds
    when the trial ends, so the best trial is the right one."""
    folder = tmp_path / "manifest"
    folder.mkdir()
    path = tmp_path / "katib" / "metrics.json"
    exp = apply(backend, _rewriter_experiment(path), folder, REWRITER)
    assert last(exp) == ("Succeeded", "ExperimentMaxTrialsReached"), exp["status"]
    assert exp["status"]["trialsSucceeded"] == 3
    for t in trials_of(backend):
        n = t["spec"]["parameterAssignments"][0]["value"]
        assert t["status"]["observation"]["metrics"][0]["latest"] == n
    best = exp["status"]["currentOptimalTrial"]
    assert best["parameterAssignments"] == [{"name": "n", "value": "3"}]
    # applied again: the file the last trial wrote is kflab's to remove
    backend.delete("Experiment", "exp")
    again = apply(backend, _rewriter_experiment(path), folder, REWRITER)
    assert again["status"]["trialsSucceeded"] == 3


def test_file_collector_never_deletes_a_file_no_trial_wrote(backend: LocalBackend,
                                                            tmp_path: Path) -> None:
    folder = tmp_path / "manifest"
    folder.mkdir()
    path = tmp_path / "theirs.json"
    path.write_text("someone's data\n")
    obj = _rewriter_experiment(path)
    obj["spec"]["maxFailedTrialCount"] = 1
    exp = apply(backend, obj, folder, REWRITER)
    assert last(exp) == ("Failed", "ExperimentFailed")
    message = trials_of(backend)[0]["status"]["conditions"][-1]["message"]
    assert f"the metrics file {path} exists and no trial wrote it" in message
    assert path.read_text() == "someone's data\n"


def test_trial_spec_metadata_references_read_the_trial_spec(backend: LocalBackend,
                                                             tmp_path: Path) -> None:
    """Katib's generator (manifest/generator.go applyParameters) reads
    ${trialSpec.Labels[k]} / .Annotations[k] from the trial spec's own metadata, and
    fails on a key it lacks (no trial is ever created): refused at apply."""
    from lab.errors import InputError

    obj = experiment(maxTrialCount=1, parallelTrialCount=1, maxFailedTrialCount=1)
    obj["metadata"]["labels"] = {"team": "from-the-experiment"}
    tt = obj["spec"]["trialTemplate"]
    tt["trialParameters"] += [{"name": "team", "reference": "${trialSpec.Labels[team]}"},
                              {"name": "note", "reference": "${trialSpec.Annotations[note]}"}]
    tt["trialSpec"]["metadata"] = {"labels": {"team": "blue"}, "annotations": {"note": "n1"}}
    container(obj)["command"] += ["--team=${trialParameters.team}",
                                  "--note=${trialParameters.note}"]
    exp = apply(backend, obj, tmp_path)
    assert exp["status"]["trialsSucceeded"] == 1
    run = trials_of(backend)[0]["spec"]["runSpec"]
    command = run["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-2:] == ["--team=blue", "--note=n1"]
    backend.delete("Experiment", "exp")
    del tt["trialSpec"]["metadata"]["labels"]
    with pytest.raises(InputError) as err:
        apply(backend, obj, tmp_path)
    assert "failed to fetch Label: team" in str(err.value)
    assert backend.get("Experiment", "exp") is None


def test_applying_the_same_experiment_again_changes_nothing(backend: LocalBackend,
                                                            tmp_path: Path) -> None:
    """kubectl apply of an unchanged Experiment says `unchanged` and nothing re-runs; a
    changed one runs again."""
    obj = experiment(maxTrialCount=2)
    first = apply(backend, obj, tmp_path)
    assert backend.last_apply == "created"
    names = sorted(t["metadata"]["name"] for t in trials_of(backend))
    again = apply(backend, experiment(maxTrialCount=2), tmp_path)
    assert backend.last_apply == "unchanged"
    assert sorted(t["metadata"]["name"] for t in trials_of(backend)) == names
    assert again["status"] == first["status"]
    apply(backend, experiment(maxTrialCount=3), tmp_path)
    assert backend.last_apply == "configured"
    assert len(trials_of(backend)) == 3
    assert not set(names) & {t["metadata"]["name"] for t in trials_of(backend)}


def test_a_failed_trial_says_what_its_process_printed_last(backend: LocalBackend,
                                                           tmp_path: Path) -> None:
    obj = experiment(maxTrialCount=1, parallelTrialCount=1, maxFailedTrialCount=1)
    container(obj)["command"] = [sys.executable, "missing-script.py",
                                 "--x=${trialParameters.x}", "--n=${trialParameters.n}"]
    apply(backend, obj, tmp_path)
    message = trials_of(backend)[0]["status"]["conditions"][-1]["message"]
    assert "process exited with code 2: " in message and \
        "missing-script.py" in message, message
