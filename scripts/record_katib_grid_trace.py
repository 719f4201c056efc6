"""Record the order in which Katib's grid suggestion assigns grid points.

Katib v0.19 serves `grid` with optuna 3.3.0 (its suggestion-optuna image pins it); the
pinned optuna of this project shuffles differently, so tests replay a trace recorded with
the real 3.3.0 instead. Run in a throwaway environment:

    python3 -m venv /tmp/opt33 && /tmp/opt33/bin/pip install optuna==3.3.0
    /tmp/opt33/bin/python scripts/record_katib_grid_trace.py

It drives optuna as Katib's suggestion service does (kubeflow/katib
pkg/suggestion/v1beta1/optuna/base_service.py): GridSampler over the combinations Katib
builds (internal/search_space.py convert_to_combinations), seeded by random_state, asked
with the fixed distributions, finished trials told before the next ask (failed ones never).
The cases and their points are in tests/data/fidelity/katib_grid_trace.json.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import optuna


def combinations(params: list[dict]) -> dict:
    out: dict = {}
    for p in params:
        space = p["feasibleSpace"]
        if p["parameterType"] == "double":
            lo, hi, step = float(space["min"]), float(space["max"]), float(space["step"])
            values = np.arange(lo, hi + step, step)
            out[p["name"]] = values[:-1] if values[-1] > hi else values
        elif p["parameterType"] == "int":
            out[p["name"]] = range(int(space["min"]), int(space["max"]) + 1,
                                   int(space.get("step", 1)))
        else:
            out[p["name"]] = space["list"]
    return out


def distributions(params: list[dict]) -> dict:
    out: dict = {}
    for p in params:
        space = p["feasibleSpace"]
        if p["parameterType"] == "double":
            out[p["name"]] = optuna.distributions.FloatDistribution(
                float(space["min"]), float(space["max"]), step=float(space["step"]))
        elif p["parameterType"] == "int":
            out[p["name"]] = optuna.distributions.IntDistribution(
                int(space["min"]), int(space["max"]), step=int(space.get("step", 1)))
        else:
            out[p["name"]] = optuna.distributions.CategoricalDistribution(space["list"])
    return out


def record(case: dict) -> list[list[str]]:
    """Trials finish in creation order; those listed in `failed` are never told."""
    params = case["parameters"]
    kw = {} if case["seed"] is None else {"seed": case["seed"]}
    study = optuna.create_study(sampler=optuna.samplers.GridSampler(combinations(params), **kw))
    fixed = distributions(params)
    asked: list = []
    points: list[list[str]] = []

    def ask(n: int) -> None:
        for _ in range(n):
            trial = study.ask(fixed_distributions=fixed)
            asked.append(trial)
            points.append([str(trial.params[p["name"]]) for p in params])

    ask(case["parallel"])
    done = 0
    while len(asked) < case["max_trials"]:
        if done not in case["failed"]:
            study.tell(asked[done].number, float(done))
        done += 1
        ask(1)
    return points


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/fidelity/katib_grid_trace.json"
    with open(path) as fh:
        data = json.load(fh)
    for case in data["cases"]:
        got = record(case)
        print(("same    " if got == case["points"] else "DIFFERS ") + case["name"])
