"""Shared builders for the tuning tests: a valid Experiment and tiny trial scripts."""

from __future__ import annotations

import copy
import sys
import textwrap
from pathlib import Path
from typing import Any

BASE: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1beta1",
    "kind": "Experiment",
    "metadata": {"name": "exp"},
    "spec": {
        "objective": {"type": "minimize", "objectiveMetricName": "loss"},
        "algorithm": {"algorithmName": "random",
                      "algorithmSettings": [{"name": "random_state", "value": "1"}]},
        "parallelTrialCount": 2,
        "maxTrialCount": 4,
        "maxFailedTrialCount": 2,
        "parameters": [
            {"name": "x", "parameterType": "double",
             "feasibleSpace": {"min": "0", "max": "1"}},
            {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "3"}},
        ],
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialParameters": [{"name": "x", "reference": "x"},
                                {"name": "n", "reference": "n"}],
            "trialSpec": {
                "apiVersion": "batch/v1", "kind": "Job",
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "training-container", "image": "python:3.11-slim",
                    "command": [sys.executable, "trial.py", "--x=${trialParameters.x}",
                                "--n=${trialParameters.n}"],
                }]}}},
            },
        },
    },
}

# A trial whose loss is known in advance: (x - 0.5)^2 + n / 10, printed Katib-style.
TRIAL = """
import os, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
x, n = float(args.get("x", 0)), int(args.get("n", 0))
time.sleep(float(os.environ.get("TRIAL_SLEEP", "0")))
print(f"loss={(x - 0.5) ** 2 + n / 10:.6f}")
"""


def experiment(**spec_changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASE)
    obj["spec"].update(copy.deepcopy(spec_changes))
    return obj


def container(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"][0]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path
