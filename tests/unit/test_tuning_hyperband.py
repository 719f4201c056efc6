"""Katib v0.19.0's hyperband suggestion (pkg/suggestion/v1beta1/hyperband/service.py),
restated in lab/backends/local/tuning/hyperband.py: Katib's validation texts, its
brackets and request bookkeeping, and a run through the local tuning engine."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from tuning_helpers import experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.tuning import hyperband
from lab.backends.local.tuning import spec as tuning_spec
from lab.backends.local.tuning.space import Param
from lab.errors import LabError

# The search space of Katib's own test (test/unit/v1beta1/suggestion/
# test_hyperband_service.py test_get_suggestion).
KATIB_PARAMS = (
    Param("param-1", "int", 1, 5),
    Param("param-2", "categorical", values=("cat1", "cat2", "cat3")),
    Param("param-3", "discrete", values=("3", "2", "6")),
    Param("param-4", "double", 1, 5),
)


def settings(**kw: str) -> dict[str, str]:
    return {"r_l": "10", "resource_name": "param-1", **kw}


def test_katibs_own_case_gives_two_points_in_the_space() -> None:
    """Katib's test: r_l 10, two requested -> two assignments (here checked in range)."""
    hb = hyperband.Hyperband(settings(), KATIB_PARAMS, "test", True, "metric-2")
    got = hb.suggest(2, [])
    assert len(got) == 2
    for a in got:
        values = {x["name"]: x["value"] for x in a}
        assert [x["name"] for x in a] == ["param-1", "param-2", "param-3", "param-4"]
        # r_l 10, eta 3: s_max 2, r = 10/9 -> int 1 in the resource parameter
        assert values["param-1"] == "1"
        assert values["param-2"] in ("cat1", "cat2", "cat3")
        assert values["param-3"] in ("3", "2", "6")
        assert 1 <= float(values["param-4"]) <= 5
    # the state Katib writes back (HyperBandParam.generate), as Python writes the numbers
    assert {k: hb.settings[k] for k in ("eta", "s_max", "r_l", "b_l", "n", "current_s",
                                        "current_i", "evaluating_trials")} == {
        "eta": "3", "s_max": "2", "r_l": "10.0", "b_l": "30.0", "n": "2", "current_s": "2",
        "current_i": "0", "evaluating_trials": "2"}
    assert math.isclose(float(hb.settings["r"]), 10 / 9)


@pytest.mark.parametrize(("given", "parallel", "message"), [
    ({"r_l": "9"}, 9, "r_l and resource_name must be set."),
    ({"resource_name": "param-1"}, 9, "r_l and resource_name must be set."),
    (settings(r_l="ten"), 9, "r_l must be a positive float number."),
    (settings(r_l="-1"), 9, "r_l must be a positive float number."),
    (settings(r_l="9"), 8, "parallelTrialCount must be not less than 9."),
    (settings(r_l="9", eta="0"), 8, "parallelTrialCount must be not less than 9."),
    # validation reads eta as int(float(eta)): 2.9 counts as 2 (2**1), not 2.9
    (settings(r_l="3", eta="2.9"), 1, "parallelTrialCount must be not less than 2."),
    (settings(r_l="0"), 9, "Exception calling application: math domain error"),
    (settings(eta="1"), 9, "Exception calling application: float division by zero"),
    (settings(eta="x"), 9,
     "Exception calling application: could not convert string to float: 'x'"),
    (settings(resource_name="epochs"), 9,
     "value of resource_name setting must be in parameters."),
])
def test_hyperband_validation_messages_are_katibs(given: dict[str, str], parallel: int,
                                                   message: str) -> None:
    assert hyperband.validate(given, KATIB_PARAMS, parallel) == message


def test_a_bad_setting_is_refused_at_apply_with_katibs_text() -> None:
    obj = experiment(algorithm={"algorithmName": "hyperband", "algorithmSettings": [
        {"name": "r_l", "value": "9"}, {"name": "resource_name", "value": "n"}]},
        parallelTrialCount=3, maxTrialCount=9)
    with pytest.raises(LabError) as err:
        tuning_spec.parse(obj)
    assert "spec.algorithm.algorithmSettings" in str(err.value)
    assert "parallelTrialCount must be not less than 9." in str(err.value)
    assert "Validation failed: ValidateAlgorithmSettings Error:" in str(err.value)


def _done(assignments: list[dict[str, str]], value: float) -> dict[str, Any]:
    return {"spec": {"parameterAssignments": assignments,
                     "objective": {"objectiveMetricName": "loss", "metricStrategies": [
                         {"name": "loss", "value": "min"}]}},
            "status": {"conditions": [{"type": "Succeeded", "status": "True"}],
                       "observation": {"metrics": [{"name": "loss", "latest": str(value),
                                                    "min": str(value), "max": str(value)}]}}}


def test_brackets_follow_katibs_arithmetic() -> None:
    """r_l 9, eta 3: master bracket of 9 at r=1; a request of 3 then is refused (the
    child bracket answers 1: Katib's controller keeps asking); a request of 1 gets the
    best trial again with r = 3."""
    params = (Param("x", "double", 0, 1), Param("epochs", "int", 1, 9))
    hb = hyperband.Hyperband({"r_l": "9", "resource_name": "epochs"}, params, "e", False,
                             "loss")
    master = hb.suggest(9, [])
    assert {a[1]["value"] for a in master} == {"1"}
    trials = [_done(a, float(a[0]["value"])) for a in master]
    before = dict(hb.settings)
    with pytest.raises(hyperband.NoSuggestion, match="unexpected trials"):
        hb.suggest(3, trials)
    assert hb.settings == before  # a refused answer leaves the state as it was
    running = [*trials[:-1], {**trials[-1], "status": {"conditions": []}}]
    with pytest.raises(hyperband.NoSuggestion, match="not completed yet for experiment e"):
        hb.suggest(1, running)
    (child,) = hb.suggest(1, trials)
    best = min(master, key=lambda a: float(a[0]["value"]))
    assert child == [best[0], {"name": "epochs", "value": "3"}]
    assert (hb.settings["current_i"], hb.settings["evaluating_trials"]) == ("1", "1")


def test_discrete_values_katib_cannot_read_are_refused() -> None:
    """Katib validates them, then fails every GetSuggestions: refused at apply, saying so."""
    params = (Param("lr", "discrete", values=("0.1", "0.2")), Param("epochs", "int", 1, 3))
    assert hyperband.validate({"r_l": "3", "resource_name": "epochs"}, params, 3) is None
    assert hyperband.unreadable(params) == "invalid literal for int() with base 10: '0.1'"
    obj = experiment(algorithm={"algorithmName": "hyperband", "algorithmSettings": [
        {"name": "r_l", "value": "3"}, {"name": "resource_name", "value": "n"}]},
        parallelTrialCount=3, maxTrialCount=3)
    obj["spec"]["parameters"][0] = {"name": "x", "parameterType": "discrete",
                                    "feasibleSpace": {"list": ["0.1", "0.2"]}}
    with pytest.raises(LabError) as err:
        tuning_spec.parse(obj)
    assert "spec.parameters" in str(err.value) and "stays Running" in str(err.value)


TRIAL = """
import sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
print(f"loss={(float(args['x']) - 0.5) ** 2 + 1 / int(args['n']):.6f}")
"""


def _hb(max_trials: int, parallel: int = 3) -> dict:
    return experiment(algorithm={"algorithmName": "hyperband", "algorithmSettings": [
        {"name": "r_l", "value": "3"}, {"name": "resource_name", "value": "n"}]},
        parallelTrialCount=parallel, maxTrialCount=max_trials, maxFailedTrialCount=1)


def test_hyperband_runs_its_brackets_on_the_local_backend(tmp_path: Path) -> None:
    """r_l 3, eta 3: 3 random points at n=1, then (one trial left) the best again at n=3."""
    write(tmp_path, "trial.py", TRIAL)
    backend = LocalBackend(str(tmp_path / "state"))
    exp = backend.apply(_hb(4), base_dir=tmp_path)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    trials = sorted(backend.list("Trial"),
                    key=lambda t: t["metadata"]["creationTimestamp"])
    ns = [{a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]}["n"]
          for t in trials]
    assert sorted(ns) == ["1", "1", "1", "3"]
    first = [t for t in trials if {a["name"]: a["value"] for a in
                                   t["spec"]["parameterAssignments"]}["n"] == "1"]
    best = min(first, key=lambda t: float(t["status"]["observation"]["metrics"][0]["latest"]))
    last = next(t for t in trials if t not in first)
    x = {a["name"]: a["value"] for a in last["spec"]["parameterAssignments"]}["x"]
    assert x == {a["name"]: a["value"] for a in best["spec"]["parameterAssignments"]}["x"]


def test_hyperband_stall_ends_failed_saying_a_cluster_stays_running(tmp_path: Path) -> None:
    """After the master bracket, 3 more trials asked for, the child bracket answers 1:
    Katib's controller would ask forever; here the run ends Failed, saying so."""
    write(tmp_path, "trial.py", TRIAL)
    backend = LocalBackend(str(tmp_path / "state"))
    events: list[dict] = []
    backend.sink = events.append
    exp = backend.apply(_hb(6), base_dir=tmp_path)
    cond = exp["status"]["conditions"][-1]
    assert cond["type"] == "Failed"
    assert "The response contains unexpected trials" in cond["message"]
    assert "stays Running" in cond["message"]
    assert len(backend.list("Trial")) == 3
    assert any(e.get("rule") == "katib.hyperband.stalled" for e in events)
    assert exp["metadata"]["annotations"]["kflab.dev/local-differences"].split(",") == [
        "katib.trialTemplate.cluster-fields", "katib.hyperband.stalled"]


def test_a_state_setting_katib_cannot_read_fails_the_request_as_katib_does() -> None:
    """n given by hand as text: Katib's GetSuggestions raises at every request."""
    hb = hyperband.Hyperband(settings(n="many"), KATIB_PARAMS, "test", True, "metric-2")
    with pytest.raises(hyperband.NoSuggestion, match="Exception calling application: "
                                                     "could not convert string to float"):
        hb.suggest(2, [])
