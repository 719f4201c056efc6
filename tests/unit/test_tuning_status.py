"""Experiment status by the Katib controller's rules, and its shape against the schemas."""

from __future__ import annotations

import copy
from typing import Any

from lab.backends.local.tuning import status as ts

EXP = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
       "metadata": {"name": "e", "namespace": "default"},
       "spec": {"objective": {"type": "maximize", "objectiveMetricName": "acc", "goal": 0.9,
                              "metricStrategies": [{"name": "acc", "value": "max"}]},
                "maxTrialCount": 4, "maxFailedTrialCount": 2}}


def trial(name: str, state: str, acc: str | None = None) -> dict[str, Any]:
    t = {"metadata": {"name": name}, "spec": {"objective": EXP["spec"]["objective"],
                                              "parameterAssignments": [
                                                  {"name": "x", "value": name}]},
         "status": {}}
    ts.trial_created(t)
    if state != "Created":
        ts.trial_running(t)
    if acc is not None:
        t["status"]["observation"] = {"metrics": [
            {"name": "acc", "min": acc, "max": acc, "latest": acc}]}
    if state not in ("Created", "Running"):
        ts.trial_finished(t, state)
    return t


def run(trials: list[dict], done: bool = False, **spec: Any) -> dict[str, Any]:
    exp = copy.deepcopy(EXP)
    exp["spec"].update(spec)
    ts.experiment_created(exp)
    ts.summarize(exp, [])
    ts.update_condition(exp, False, False)  # the controller's first pass: Running
    reached = ts.summarize(exp, trials)
    ts.update_condition(exp, reached, done)
    return exp


def last(exp: dict) -> tuple[str, str]:
    cond = ts.last_condition(exp)
    assert cond is not None
    return cond["type"], cond["reason"]


def test_running_then_counts_omit_zeroes() -> None:
    exp = run([trial("a", "Running"), trial("b", "Succeeded", "0.5")])
    assert last(exp) == ("Running", ts.RUNNING)
    st = exp["status"]
    assert st["trials"] == 2 and st["trialsRunning"] == 1 and st["trialsSucceeded"] == 1
    assert "trialsFailed" not in st and "failedTrialList" not in st  # Go omitempty
    assert st["currentOptimalTrial"]["bestTrialName"] == "b"


def test_goal_reached_wins_over_everything() -> None:
    exp = run([trial("a", "Failed"), trial("b", "Failed"), trial("c", "Succeeded", "0.95")])
    assert last(exp) == ("Succeeded", ts.GOAL_REACHED)
    # Katib flips Running to False before adding the terminal condition
    assert [c["type"] for c in exp["status"]["conditions"]] == ["Created", "Running",
                                                                 "Succeeded"]
    assert exp["status"]["conditions"][1]["status"] == "False"


def test_metrics_unavailable_counts_as_failed_for_max_failed() -> None:
    exp = run([trial("a", "Failed"), trial("b", "MetricsUnavailable"), trial("c", "Running")])
    assert last(exp) == ("Failed", ts.FAILED)
    assert exp["status"]["trialMetricsUnavailable"] == 1
    assert exp["status"]["metricsUnavailableTrialList"] == ["b"]


def test_max_trials_counts_every_completed_kind() -> None:
    trials = [trial("a", "Succeeded", "0.1"), trial("b", "Killed"),
              trial("c", "EarlyStopped", "0.2"), trial("d", "Failed")]
    assert last(run(trials)) == ("Succeeded", ts.MAX_TRIALS_REACHED)
    assert last(run(trials[:3])) == ("Running", ts.RUNNING)


def test_max_failed_zero_means_never_fail_on_zero_failures() -> None:
    assert last(run([trial("a", "Succeeded", "0.1")], maxFailedTrialCount=0))[0] == "Running"


def test_suggestion_end_waits_for_active_trials() -> None:
    spec = {"maxTrialCount": None}
    assert last(run([trial("a", "Running")], True, **spec))[0] == "Running"
    assert last(run([trial("a", "Succeeded", "0.1")], True, **spec)) == (
        "Succeeded", ts.SUGGESTION_END)


def test_best_trial_by_strategy_and_direction() -> None:
    exp = run([trial("a", "Succeeded", "0.3"), trial("b", "Succeeded", "0.7"),
               trial("c", "Succeeded", "0.6")])
    best = exp["status"]["currentOptimalTrial"]
    assert best["bestTrialName"] == "b"
    assert best["parameterAssignments"] == [{"name": "x", "value": "b"}]
    assert best["observation"]["metrics"][0]["max"] == "0.7"


def test_trial_precedence_and_reasons() -> None:
    t = trial("a", "Succeeded", "0.1")
    assert ts.trial_state(t) == "Succeeded"
    assert ts.last_condition(t)["reason"] == "TrialSucceeded"
    ts.trial_finished(t, "Killed")
    assert ts.trial_state(t) == "Killed"  # Killed outranks Succeeded, as in Katib


def test_setting_an_unchanged_condition_is_a_no_op() -> None:
    exp = run([trial("a", "Running")])
    before = copy.deepcopy(exp["status"]["conditions"])
    ts.update_condition(exp, False, False)
    assert exp["status"]["conditions"] == before


def test_a_job_trials_reasons_are_katibs_on_kubernetes_1_34() -> None:
    """Katib v0.19.0 copies the Job's Complete/Failed condition into the trial's reason and
    message (trial_controller_util.go:54-59, 83-88, 103-108); the v1.34 Job controller's
    Complete is CompletionsReached / "Reached expected number of succeeded pods", its Failed
    BackoffLimitExceeded. Before: a bare "TrialSucceeded"."""
    t = trial("a", "Running", "0.9")
    ts.trial_finished(t, "Succeeded", job_kind="Job")
    cond = ts.last_condition(t)
    assert (cond["type"], cond["reason"], cond["message"]) == (
        "Succeeded", "TrialSucceeded. Job reason: CompletionsReached",
        "Trial has succeeded. Job message: Reached expected number of succeeded pods")
    failed = trial("b", "Running")
    ts.trial_finished(failed, "Failed", "exit code 1: No module named 'sklearn'",
                      job_kind="Job")
    cond = ts.last_condition(failed)
    assert cond["reason"] == "TrialFailed. Job reason: BackoffLimitExceeded"
    assert cond["message"] == "Trial has failed. Job message: exit code 1: No module named " \
                              "'sklearn'"  # kflab says why where Katib copies the Job's line
    quiet = trial("c", "Running")
    ts.trial_finished(quiet, "MetricsUnavailable", job_kind="Job")
    cond = ts.last_condition(quiet)
    assert (cond["reason"], cond["message"]) == (
        "MetricsUnavailable. Job reason: CompletionsReached",
        "Metrics are not available. Job message: Reached expected number of succeeded pods")
    py = trial("d", "Running", "0.9")
    ts.trial_finished(py, "Succeeded", job_kind="PyTorchJob")
    assert ts.last_condition(py)["reason"] == "TrialSucceeded. Job reason: PyTorchJobSucceeded"
    assert ts.last_condition(py)["message"] == ("Trial has succeeded. Job message: PyTorchJob d "
                                                "is successfully completed.")
