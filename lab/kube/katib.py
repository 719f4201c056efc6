"""Reading Katib's status shape the way Katib itself reads it (both backends).

`kflab get trials` and the local controller rank a trial by the same value Katib ranks it
by, so the table never makes the wrong trial look best.
"""

from __future__ import annotations

from typing import Any

UNAVAILABLE = "unavailable"  # Katib's consts.UnavailableMetricValue


def metric_value(observation: dict[str, Any] | None, metric: str, strategy: str) -> str:
    """A metric's value by strategy, as Katib's experiment controller extracts it
    (kubeflow/katib pkg/controller.v1beta1/experiment/util/status_util.go,
    `getObjectiveMetricValue`): min or max, falling back to latest when that extreme is
    unavailable; latest as is; an unknown strategy gives nothing."""
    for m in (observation or {}).get("metrics") or []:
        if not isinstance(m, dict) or m.get("name") != metric:
            continue
        if strategy in ("min", "max"):
            value = m.get(strategy, UNAVAILABLE)
            return str(m.get("latest", UNAVAILABLE) if value == UNAVAILABLE else value)
        if strategy == "latest":
            return str(m.get("latest", UNAVAILABLE))
    return UNAVAILABLE


def trial_objective(trial: dict[str, Any]) -> str:
    """The value Katib ranks a Trial by: its objective metric, by the metric's strategy."""
    objective = ((trial.get("spec") or {}).get("objective")) or {}
    metric = objective.get("objectiveMetricName", "")
    strategy = next((s.get("value") for s in objective.get("metricStrategies") or []
                     if isinstance(s, dict) and s.get("name") == metric), "")
    return metric_value((trial.get("status") or {}).get("observation"), metric, str(strategy))


def objective_column(trial: dict[str, Any]) -> str:
    """OBJECTIVE of `kflab get trials`: the ranked value, blank when there is none."""
    value = trial_objective(trial)
    return "" if value == UNAVAILABLE else value


def failed_count(experiment: dict[str, Any]) -> int:
    """Trials Katib counts against maxFailedTrialCount: failed plus metrics unavailable
    (status_util.go `UpdateExperimentStatusCondition`)."""
    status = experiment.get("status") or {}
    return int(status.get("trialsFailed") or 0) + int(status.get("trialMetricsUnavailable") or 0)
