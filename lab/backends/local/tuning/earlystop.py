"""Katib's median stopping, as its two halves decide it.

The rule (kubeflow/katib pkg/earlystopping/v1beta1/medianstop/service.py,
`MedianStopService.get_median_value` and `GetEarlyStoppingRules`): once at least
`min_trials_required` trials have succeeded, each new trial gets one rule whose value is
the average, over the succeeded trials, of each trial's average of its first `start_step`
reported objective values -- an arithmetic mean, despite the service's name -- compared
`less` when maximizing, `greater` when minimizing, from `start_step`. The rule is fixed when
the trial is created (pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go
`SyncAssignments`).

The decision (cmd/metricscollector/v1beta1/file-metricscollector/main.go,
`watchMetricsFile` and `updateStopRules`): the collector counts the rule metric's reports;
for the objective metric it keeps the best value so far (min when minimizing, max when
maximizing); at exactly the `start_step`-th report it compares that best value with the
rule once, and the trial is stopped only if it breaks the rule then. A trial that passes at
`start_step` is never checked again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COMPARISONS = ("equal", "less", "greater")


def _floats(values: Iterable[str]) -> list[float]:
    out = []
    for v in values:
        try:
            out.append(float(v))
        except ValueError:
            continue
    return out


def rule_value(succeeded: Sequence[Sequence[str]], start_step: int,
               min_trials_required: int) -> float | None:
    """The rule's value from the succeeded trials' objective reports (in report order),
    or None while fewer than `min_trials_required` trials have succeeded."""
    averages = []
    for reports in succeeded:
        first = _floats(reports)[:start_step]
        if first:
            averages.append(sum(first) / len(first))
    if not averages or len(averages) < min_trials_required:
        return None
    return sum(averages) / len(averages)


def rules(succeeded: Sequence[Sequence[str]], *, metric: str, maximize: bool,
          start_step: int, min_trials_required: int) -> list[dict[str, Any]]:
    """The trial's `spec.earlyStoppingRules` as Katib writes them (empty: no rule yet)."""
    value = rule_value(succeeded, start_step, min_trials_required)
    if value is None:
        return []
    return [{"name": metric, "value": str(value),
             "comparison": "less" if maximize else "greater", "startStep": start_step}]


def _breaks(value: float, rule: Mapping[str, Any]) -> bool:
    bound = float(rule["value"])
    comparison = rule["comparison"]
    if comparison == "less":
        return value < bound
    if comparison == "greater":
        return value > bound
    return value == bound


def should_stop(trial_rules: Sequence[Mapping[str, Any]], reports: Mapping[str, Sequence[str]],
                *, objective: str, maximize: bool) -> bool:
    """True once every rule has been broken at its check, as the collector decides."""
    if not trial_rules:
        return False
    for rule in trial_rules:
        values = _floats(reports.get(rule["name"], []))
        start = int(rule.get("startStep") or 0)
        checks = range(start - 1, start) if start > 0 else range(len(values))
        broken = False
        for i in checks:
            if i >= len(values):
                break
            seen = values[: i + 1]
            value = (max(seen) if maximize else min(seen)) if rule["name"] == objective \
                else seen[-1]
            if _breaks(value, rule):
                broken = True
                break
        if not broken:
            return False
    return True
