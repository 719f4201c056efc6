"""Katib's resume: a completed Experiment with resumePolicy LongRunning or FromVolume,
applied again with a larger maxTrialCount, restarts and keeps its trials
(experiment_controller.go `Reconcile`, status_util.go `IsCompletedExperimentRestartable`,
the webhook's `ValidateExperiment`). Katib's own e2e test does exactly this with
examples/v1beta1/resume-experiment/*.yaml (maxTrialCount + 1, parallelTrialCount + 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_helpers import TRIAL, experiment, write

from lab.backends.local import LocalBackend
from lab.errors import InputError


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    write(tmp_path, "trial.py", TRIAL)
    return LocalBackend(str(tmp_path / "state"))


def _conds(exp: dict) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in exp["status"]["conditions"]]


@pytest.mark.parametrize("policy", ["LongRunning", "FromVolume"])
def test_more_trials_restart_the_experiment_and_keep_its_trials(
        backend: LocalBackend, tmp_path: Path, policy: str) -> None:
    first = backend.apply(experiment(maxTrialCount=2, parallelTrialCount=1,
                                     resumePolicy=policy), base_dir=tmp_path)
    assert first["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    before = {t["metadata"]["name"] for t in backend.list("Trial")}
    again = backend.apply(experiment(maxTrialCount=3, parallelTrialCount=2,
                                     resumePolicy=policy), base_dir=tmp_path)
    after = {t["metadata"]["name"] for t in backend.list("Trial")}
    assert before < after and len(after) == 3  # kept, and one more
    assert again["status"]["trials"] == 3
    assert again["spec"]["maxTrialCount"] == 3 and again["spec"]["parallelTrialCount"] == 2
    # Katib's conditions after a restart: Restarting stays, Running flips, Succeeded again.
    assert _conds(again) == [("Created", "True", "ExperimentCreated"),
                             ("Restarting", "True", "ExperimentRestarting"),
                             ("Running", "False", "ExperimentRunning"),
                             ("Succeeded", "True", "ExperimentMaxTrialsReached")]


def test_a_budget_not_above_the_trials_is_refused_as_the_webhook_does(
        backend: LocalBackend, tmp_path: Path) -> None:
    backend.apply(experiment(maxTrialCount=2, parallelTrialCount=1,
                             resumePolicy="LongRunning"), base_dir=tmp_path)
    with pytest.raises(InputError, match=r"greater than status\.trials"):
        backend.apply(experiment(maxTrialCount=2, parallelTrialCount=2,
                                 resumePolicy="LongRunning"), base_dir=tmp_path)
    assert len(backend.list("Trial")) == 2  # nothing changed


def test_never_replaces_the_experiment_as_before(backend: LocalBackend,
                                                 tmp_path: Path) -> None:
    backend.apply(experiment(maxTrialCount=2, parallelTrialCount=1), base_dir=tmp_path)
    before = {t["metadata"]["name"] for t in backend.list("Trial")}
    exp = backend.apply(experiment(maxTrialCount=3, parallelTrialCount=1), base_dir=tmp_path)
    assert exp["spec"]["resumePolicy"] == "Never"  # Katib's default
    after = {t["metadata"]["name"] for t in backend.list("Trial")}
    assert not before & after and len(after) == 3
