"""Katib v1beta1 status shapes as JSON Schema (Draft 4), transcribed from the field names and
types of Katib's Go API (ExperimentStatus, TrialStatus, OptimalTrial, Observation, Metric,
conditions). The upstream CRDs publish `x-kubernetes-preserve-unknown-fields` only, so
this is what pins the exact shape: unknown keys are errors."""

from __future__ import annotations

TIME = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"}
NAMES = {"type": "array", "items": {"type": "string"}}
COUNT = {"type": "integer", "minimum": 0}


def condition(types: list[str]) -> dict:
    return {"type": "object", "additionalProperties": False,
            "required": ["type", "status"],
            "properties": {"type": {"enum": types},
                           "status": {"enum": ["True", "False", "Unknown"]},
                           "reason": {"type": "string"}, "message": {"type": "string"},
                           "lastUpdateTime": TIME, "lastTransitionTime": TIME}}


METRIC = {"type": "object", "additionalProperties": False, "required": ["name"],
          "properties": {"name": {"type": "string"}, "min": {"type": "string"},
                         "max": {"type": "string"}, "latest": {"type": "string"}}}
OBSERVATION = {"type": "object", "additionalProperties": False,
               "properties": {"metrics": {"type": "array", "items": METRIC}}}
ASSIGNMENT = {"type": "object", "additionalProperties": False, "required": ["name", "value"],
              "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}

EXPERIMENT_STATUS = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "startTime": TIME, "completionTime": TIME, "lastReconcileTime": TIME,
        "conditions": {"type": "array", "items": condition(
            ["Created", "Running", "Restarting", "Succeeded", "Failed"])},
        "currentOptimalTrial": {
            "type": "object", "additionalProperties": False,
            "properties": {"bestTrialName": {"type": "string"},
                           "parameterAssignments": {"type": "array", "items": ASSIGNMENT},
                           "observation": OBSERVATION}},
        **{k: NAMES for k in ("runningTrialList", "pendingTrialList", "failedTrialList",
                              "succeededTrialList", "killedTrialList",
                              "earlyStoppedTrialList", "metricsUnavailableTrialList")},
        **{k: COUNT for k in ("trials", "trialsSucceeded", "trialsFailed", "trialsKilled",
                              "trialsPending", "trialsRunning", "trialsEarlyStopped",
                              "trialMetricsUnavailable")},
    },
}

TRIAL_STATUS = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "startTime": TIME, "completionTime": TIME, "lastReconcileTime": TIME,
        "conditions": {"type": "array", "items": condition(
            ["Created", "Running", "Succeeded", "Killed", "Failed", "MetricsUnavailable",
             "EarlyStopped"])},
        "observation": OBSERVATION,
    },
}
