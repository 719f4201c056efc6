"""Katib rules replayed against upstream: each test names the rule (lab/backends/local/
fidelity/rules.py) and the upstream source it restates, and most replay a recorded trace.

Traces (tests/data/fidelity/): the grid order recorded with optuna 3.3.0, the version Katib
v0.19's grid service pins (scripts/record_katib_grid_trace.py); the median stopping values
returned by Katib's own MedianStopService for a table modelled on its median-stop example.
"""

from __future__ import annotations

import copy
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from tuning_helpers import TRIAL, container, experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.tuning import earlystop, search
from lab.backends.local.tuning import spec as tuning_spec
from lab.backends.local.tuning import status as tuning_status
from lab.backends.local.tuning.differences import differences
from lab.backends.local.tuning.grid import KatibGrid
from lab.backends.local.tuning.handler import _defaults
from lab.backends.local.tuning.metrics import MetricLog
from lab.backends.local.tuning.spec import DEFAULT_FILTER
from lab.errors import InputError
from lab.kube.conditions import set_condition
from lab.kube.kinds import column_value, lookup
from lab.scenarios import checks
from lab.scenarios.context import Context
from lab.scenarios.model import Check

DATA = Path(__file__).resolve().parents[1] / "data" / "fidelity"
GRID = json.loads((DATA / "katib_grid_trace.json").read_text())
MEDIAN = json.loads((DATA / "katib_medianstop_trace.json").read_text())
UPSTREAM_GRID = GRID["cases"][0]["parameters"]  # katib examples/v1beta1/hp-tuning/grid.yaml


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(str(tmp_path / "state"))


def params_of(parameters: list[dict]) -> tuple:
    obj = experiment(parameters=parameters, algorithm={"algorithmName": "grid"},
                     maxTrialCount=None)
    obj["spec"]["trialTemplate"]["trialParameters"] = [
        {"name": p["name"], "reference": p["name"]} for p in parameters]
    container(obj)["command"] = ["python3", "t.py"] + [
        f"--{p['name']}=${{trialParameters.{p['name']}}}" for p in parameters]
    return tuning_spec.parse(obj).params


# --- katib.grid.order ----------------------------------------------------------------------

@pytest.mark.parametrize("case", GRID["cases"], ids=[c["name"] for c in GRID["cases"]])
def test_grid_order_replays_katib_trace(case: dict) -> None:
    """Katib's suggestion service asks `parallel` points, then one per finished trial,
    telling Optuna each finished trial that did not fail first (a failed trial's point
    stays "running" for the sampler)."""
    grid = KatibGrid(params_of(case["parameters"]), case["seed"])
    names = [p["name"] for p in case["parameters"]]
    asked: list[int] = []
    told: list[int] = []

    def ask() -> None:
        gid = grid.next([g for g in asked if g in told], [g for g in asked if g not in told])
        asked.append(gid)

    for _ in range(case["parallel"]):
        ask()
    done = 0
    while len(asked) < case["max_trials"]:
        if done not in case["failed"]:
            told.append(asked[done])
        done += 1
        ask()
    got = [[grid.assignment(g)[n] for n in names] for g in asked]
    assert got == case["points"]


def test_upstream_grid_example_runs_in_katibs_order(backend: LocalBackend,
                                                    tmp_path: Path) -> None:
    """The upstream grid example (12 trials of 45 points, 3 at a time) run for real: trials
    get the points Katib gives, in Katib's order and spelling (0.019999999999999997)."""
    case = GRID["cases"][0]
    obj = experiment(parameters=case["parameters"], parallelTrialCount=3, maxTrialCount=12,
                     maxFailedTrialCount=3,
                     algorithm={"algorithmName": "grid", "algorithmSettings": [
                         {"name": "random_state", "value": str(case["seed"])}]})
    obj["spec"]["trialTemplate"]["trialParameters"] = [
        {"name": "learningRate", "reference": "lr"}, {"name": "momentum", "reference": "momentum"}]
    container(obj)["command"] = [sys.executable, "trial.py", "--lr=${trialParameters.learningRate}",
                                 "--momentum=${trialParameters.momentum}"]
    write(tmp_path, "trial.py", "print('loss=0.5')\n")
    events: list[dict] = []
    backend.sink = events.append
    exp = backend.apply(obj, base_dir=tmp_path)
    started = [[e["params"]["lr"], e["params"]["momentum"]] for e in events
               if e["event"] == "trial-started"]
    assert started == case["points"]
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    # grid is Katib's own rule here: the only difference is the ignored image
    assert exp["metadata"]["annotations"]["kflab.dev/local-differences"] == \
        "katib.trialTemplate.cluster-fields"


def test_unseeded_grid_is_shuffled_not_declaration_order() -> None:
    """Without random_state Katib's sampler is unseeded: the 12 trials of the upstream
    example are spread over the grid, not the first points in declaration order."""
    params = params_of(UPSTREAM_GRID)
    firsts = []
    for _ in range(3):
        grid, asked = KatibGrid(params, None), []
        for _ in range(12):
            asked.append(grid.next([], list(asked)))
        assert len(set(asked)) == 12
        firsts.append(asked)
        lrs = {grid.assignment(g)["lr"] for g in asked}
        assert len(lrs) > 3  # 12 points in declaration order cover only 3 learning rates
    assert len({tuple(a) for a in firsts}) > 1  # not a fixed order


# --- katib.earlyStopping.medianstop --------------------------------------------------------

def test_medianstop_replays_the_upstream_example() -> None:
    """Rule values are those Katib's MedianStopService returned for the same reports; the
    outcome is the collector's single check of the best value at start_step."""
    reports = {t["name"]: [str(v) for v in t["reports"]] for t in MEDIAN["trials"]}
    succeeded: list[str] = []
    rules: dict[str, list[dict[str, Any]]] = {}
    outcome: dict[str, str] = {}
    for event, name in MEDIAN["events"]:
        if event == "create":
            rules[name] = earlystop.rules(
                [reports[n] for n in succeeded], metric=MEDIAN["metric"], maximize=False,
                start_step=MEDIAN["start_step"], min_trials_required=MEDIAN["min_trials_required"])
        else:
            stop = earlystop.should_stop(rules[name], {"loss": reports[name]}, objective="loss",
                                         maximize=False)
            outcome[name] = "stop" if stop else "continue"
            if not stop:
                succeeded.append(name)
    assert {n: (r[0]["value"] if r else None) for n, r in rules.items()} == MEDIAN["rule_value"]
    assert all(r[0]["comparison"] == "greater" and r[0]["startStep"] == 2
               for r in rules.values() if r)
    assert outcome == MEDIAN["outcome"]


@pytest.mark.parametrize(("values", "stopped"), [
    (["0.90", "0.70"], True),    # best by report 2 is 0.90 < 0.95: stopped (maximize)
    (["0.90", "0.97"], False),   # best 0.97 passes at report 2
    (["0.97", "0.50", "0.10"], False),  # passed at report 2: never checked again
    (["0.90"], False),           # report 2 not reached yet
])
def test_medianstop_maximize_checks_once_with_the_best(values: list[str], stopped: bool) -> None:
    rule = [{"name": "acc", "value": "0.95", "comparison": "less", "startStep": 2}]
    assert earlystop.should_stop(rule, {"acc": values}, objective="acc",
                                 maximize=True) is stopped


# --- katib.objective.metricStrategies, parallelTrialCount default ------------------------

def test_metric_strategy_defaults_follow_the_webhook() -> None:
    obj = experiment(parallelTrialCount=None)
    obj["spec"]["objective"] = {"type": "maximize", "objectiveMetricName": "accuracy",
                                "additionalMetricNames": ["loss", "f1"],
                                "metricStrategies": [{"name": "f1", "value": "latest"}]}
    spec = tuning_spec.parse(obj)
    stored = copy.deepcopy(obj)
    _defaults(stored, spec)
    assert stored["spec"]["objective"]["metricStrategies"] == [
        {"name": "f1", "value": "latest"}, {"name": "accuracy", "value": "max"},
        {"name": "loss", "value": "max"}]  # additional metrics too: max when maximizing
    assert stored["spec"]["parallelTrialCount"] == 3
    obj["spec"]["objective"]["type"] = "minimize"
    del obj["spec"]["objective"]["metricStrategies"]
    assert tuning_spec.parse(obj).objective.strategies == {
        "accuracy": "min", "loss": "min", "f1": "min"}


# --- katib.objective.value: what `kflab get trials` and `get experiments` show ----------

def test_objective_column_is_the_ranked_value() -> None:
    trial_kind, exp_kind = lookup("trials"), lookup("experiments")
    objective = dict(trial_kind.columns)["OBJECTIVE"]
    trial = {"spec": {"objective": {"objectiveMetricName": "acc", "metricStrategies": [
        {"name": "acc", "value": "max"}]}},
        "status": {"observation": {"metrics": [
            {"name": "acc", "min": "0.1", "max": "0.9", "latest": "0.5"}]}}}
    assert column_value(objective, trial) == "0.9"  # ranked by max, not the latest
    trial["status"]["observation"]["metrics"][0]["max"] = "unavailable"
    assert column_value(objective, trial) == "0.5"  # Katib falls back to latest
    assert column_value(objective, {"spec": {}, "status": {}}) == ""
    failed = dict(exp_kind.columns)["FAILED"]
    assert column_value(failed, {"status": {"trialMetricsUnavailable": 2}}) == 2
    assert column_value(failed, {"status": {"trialsFailed": 1,
                                            "trialMetricsUnavailable": 2}}) == 3
    assert column_value(dict(exp_kind.columns)["SUCCEEDED"], {"status": {}}) == 0


# --- katib.status.conditions ---------------------------------------------------------------

def test_condition_order_and_failed_count() -> None:
    def exp(**status: Any) -> dict:
        e = {"spec": {"maxFailedTrialCount": 2, "maxTrialCount": 4}, "status": dict(status)}
        set_condition(e["status"], "Created", True, "ExperimentCreated")
        return e

    both = exp(trialsSucceeded=1, trialMetricsUnavailable=2)
    tuning_status.update_condition(both, True, False)  # goal is checked first
    assert both["status"]["conditions"][-1]["reason"] == "ExperimentGoalReached"
    failed = exp(trialsFailed=1, trialMetricsUnavailable=1, trialsSucceeded=2)
    tuning_status.update_condition(failed, False, False)  # metrics unavailable count as failed
    assert failed["status"]["conditions"][-1]["reason"] == "ExperimentFailed"
    done = exp(trialsSucceeded=3, trialsEarlyStopped=1)
    tuning_status.update_condition(done, False, False)
    assert done["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"


# --- katib.completion.running-trials, katib.trials.count ---------------------------------

SCRIPTED = """
import json, os, pathlib, sys, time
counter = pathlib.Path("counter")
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
pathlib.Path(os.environ["KATIB_TRIAL_NAME"] + ".k").write_text(str(k))
plan = json.loads(pathlib.Path("plan.json").read_text())[k]
time.sleep(plan["sleep"])
if plan["loss"] is not None:
    print(f"loss={plan['loss']}")
"""


def run_scripted(backend: LocalBackend, tmp_path: Path, plan: list[dict],
                 **spec: Any) -> tuple[dict, list[dict]]:
    write(tmp_path, "trial.py", SCRIPTED)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    exp = backend.apply(experiment(**spec), base_dir=tmp_path)
    trials = sorted(backend.list("Trial"), key=lambda t: int(
        (tmp_path / f"{t['metadata']['name']}.k").read_text()))
    return exp, trials


def test_running_trials_finish_after_the_goal(backend: LocalBackend, tmp_path: Path) -> None:
    """Trial 0 reaches the goal while trial 1 runs: trial 1 is not killed; it finishes,
    counts, and -- being better -- becomes the optimal trial (katib#855)."""
    plan = [{"sleep": 0, "loss": 0.5}, {"sleep": 3, "loss": 0.1}]
    obj_spec = {"maxTrialCount": 10, "parallelTrialCount": 2,
                "objective": {"type": "minimize", "objectiveMetricName": "loss", "goal": 1.0}}
    exp, trials = run_scripted(backend, tmp_path, plan, **obj_spec)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentGoalReached"
    assert [t["status"]["conditions"][-1]["type"] for t in trials] == ["Succeeded",
                                                                        "Succeeded"]
    assert exp["status"]["trials"] == exp["status"]["trialsSucceeded"] == 2
    assert "trialsKilled" not in exp["status"]
    assert exp["status"]["currentOptimalTrial"]["bestTrialName"] == \
        trials[1]["metadata"]["name"]


def test_trial_count_follows_reconcile_trials(backend: LocalBackend, tmp_path: Path) -> None:
    """maxTrialCount 3, two at a time, trial 0 reports nothing (MetricsUnavailable): Katib
    leaves it out of `completed` when counting trials to create, so trial 3 is created
    after trial 1 succeeds; trial 3 completes the experiment while trial 2 still runs, and
    trial 2 then finishes. Four trials for maxTrialCount 3, as on a cluster."""
    plan = [{"sleep": 0, "loss": None}, {"sleep": 2, "loss": 0.3},
            {"sleep": 6, "loss": 0.2}, {"sleep": 0, "loss": 0.4}]
    exp, trials = run_scripted(backend, tmp_path, plan, maxTrialCount=3, parallelTrialCount=2,
                               maxFailedTrialCount=None)
    assert [t["status"]["conditions"][-1]["type"] for t in trials] == [
        "MetricsUnavailable", "Succeeded", "Succeeded", "Succeeded"]
    status = exp["status"]
    assert status["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    assert status["trials"] == 4 and status["trialsSucceeded"] == 3


# --- collectors ----------------------------------------------------------------------------

def test_text_collector_filters() -> None:
    """Katib's default filter on lines that mention a metric (parseLogsInTextFormat)."""
    log = MetricLog(("loss", "accuracy"), (DEFAULT_FILTER,))
    for line in ["epoch 1: loss=0.31 accuracy=.98", "loss = -7.5e-05", "lossy text",
                 "accuracy:0.5", "val-loss=3 loss=2"]:
        log.feed(line)
    assert log.values == {"loss": ["0.31", "-7.5e-05", "2"], "accuracy": [".98"]}


JSON_TRIAL = """
import json, sys
mode = sys.argv[1].split("=")[1]
with open("metrics.json", "w") as fh:
    if mode == "number":
        fh.write(json.dumps({"loss": 0.3}) + "\\n")
    elif mode == "string":
        fh.write(json.dumps({"loss": "0.3"}) + "\\n\\n")
    else:
        fh.write("epoch 1 done\\n" + json.dumps({"loss": "0.3"}) + "\\n")
"""


def test_json_collector_reads_strings_only(backend: LocalBackend, tmp_path: Path) -> None:
    """{"loss": 0.3} is not a report for Katib's JSON collector; a line that is not JSON
    makes it fail (parseLogsInJsonFormat). Locally the trial says which and how to fix."""
    write(tmp_path, "trial.py", JSON_TRIAL)
    obj = experiment(maxTrialCount=3, parallelTrialCount=1, maxFailedTrialCount=3,
                     algorithm={"algorithmName": "grid"},
                     parameters=[{"name": "mode", "parameterType": "categorical",
                                  "feasibleSpace": {"list": ["number", "string", "text"]}}],
                     metricsCollectorSpec={"collector": {"kind": "File"}, "source": {
                         "fileSystemPath": {"path": "metrics.json", "kind": "File",
                                            "format": "JSON"}}})
    obj["spec"]["trialTemplate"]["trialParameters"] = [{"name": "mode", "reference": "mode"}]
    container(obj)["command"] = [sys.executable, "trial.py", "--mode=${trialParameters.mode}"]
    backend.apply(obj, base_dir=tmp_path)
    by_mode = {t["spec"]["parameterAssignments"][0]["value"]: t["status"]["conditions"][-1]
               for t in backend.list("Trial")}
    assert by_mode["string"]["type"] == "Succeeded"
    assert by_mode["number"]["type"] == "MetricsUnavailable"
    assert 'write {"loss": "0.3"}' in by_mode["number"]["message"]
    assert by_mode["text"]["type"] == "Failed"
    assert "line 1 of the metrics file is not a JSON object" in by_mode["text"]["message"]


# --- katib.cmaes.restart_strategy ---------------------------------------------------------

def test_cmaes_restart_is_announced_and_optuna_warnings_stay_quiet() -> None:
    obj = experiment(algorithm={"algorithmName": "cmaes", "algorithmSettings": [
        {"name": "restart_strategy", "value": "ipop"}, {"name": "sigma", "value": "0.3"}]})
    found = dict(differences(tuning_spec.parse(obj)))
    assert found["katib.cmaes.restart_strategy"] == {"value": "ipop"}
    import optuna
    from optuna.distributions import FloatDistribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning reaching the user fails the test
        sampler, _ = search.sampler("cmaes", {"restart_strategy": "bipop", "sigma": "0.3",
                                              "random_state": "1"})
        with search.quiet():
            study = optuna.create_study(sampler=sampler)
            for i in range(4):
                t = study.ask({"x": FloatDistribution(0, 1), "y": FloatDistribution(0, 1)})
                study.tell(t, float(i))


def test_cmaes_restart_strategy_outside_katibs_list_is_refused() -> None:
    obj = experiment(algorithm={"algorithmName": "cmaes", "algorithmSettings": [
        {"name": "restart_strategy", "value": "None"}]})
    with pytest.raises(InputError, match="restart_strategy 'None' is not one of ipop, bipop"):
        tuning_spec.parse(obj)


# --- katib.trialTemplate.command: the image's entrypoint --------------------------------

def test_missing_command_says_the_entrypoint_is_unknown_and_shows_the_line() -> None:
    obj = experiment()
    del container(obj)["command"]
    container(obj)["args"] = ["--x=${trialParameters.x}", "--n=${trialParameters.n}"]
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert "python:3.11-slim" in err.value.problem and "unknown locally" in err.value.problem
    assert 'command: ["python3", "/path/to/train.py"]' in str(err.value.hint)
    assert "args" in str(err.value.hint)


# --- guided check: a Failed experiment says why -------------------------------------------

def test_failed_experiment_check_names_the_trial_failure(backend: LocalBackend,
                                                         tmp_path: Path) -> None:
    """The learner wrote objectiveMetricName 'Accuracy'; the trainer prints 'accuracy'."""
    write(tmp_path, "trial.py", TRIAL.replace("loss=", "accuracy="))
    obj = experiment(maxTrialCount=2, maxFailedTrialCount=1, parallelTrialCount=1)
    obj["spec"]["objective"] = {"type": "maximize", "objectiveMetricName": "Accuracy"}
    exp = backend.apply(obj, base_dir=tmp_path)
    assert exp["status"]["conditions"][-1]["type"] == "Failed"
    ctx = Context(backend, tmp_path)
    check = Check("condition", "Experiment 'exp' has not succeeded yet", 0,
                  {"kind": "Experiment", "name": "exp", "condition": "Succeeded"}, "t:1")
    outcome = checks.evaluate(check, ctx, wait=False)
    assert not outcome.ok and outcome.failed is not None
    assert "max failed count" in outcome.failed
    assert "'Accuracy' never appeared in the output; did you mean 'accuracy'?" in outcome.failed
    assert "kflab logs trial exp-" in outcome.failed
