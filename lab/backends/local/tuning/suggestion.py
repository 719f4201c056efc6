"""Katib's suggestion service for one Experiment, on Optuna: the algorithm's sampler (or
Katib's own grid, or a service of its own such as hyperband), the assignments of the next
trial, and what finished trials are told.

Katib's experiment controller asks its suggestion service for trials and tells it about
every trial on each request (pkg/suggestion/v1beta1/internal/trial.py `Trial.convert`:
Succeeded and EarlyStopped trials with their objective); controller.py does the asking and
the telling through `ask`, `tell` and `request`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from lab.backends.local.tuning import search as tuning_search
from lab.backends.local.tuning import status as tuning_status
from lab.backends.local.tuning.grid import KatibGrid
from lab.backends.local.tuning.search import distribution_notes, distributions, quiet, sampler
from lab.backends.local.tuning.space import fmt
from lab.backends.local.tuning.spec import Spec

# Trials Katib tells its suggestion service with their objective.
METRIC_STATES = ("Succeeded", "EarlyStopped")


def is_float(text: Any) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


class Suggestions:
    """The study the algorithm samples from, and where a grid or a service stands."""

    def __init__(self, spec: Spec) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.spec = spec
        self.sampler, notes = sampler(spec.algorithm, spec.settings)
        spec.warnings.extend(notes)
        spec.warnings.extend(distribution_notes(spec.params, spec.algorithm))
        direction = "maximize" if spec.objective.type == "maximize" else "minimize"
        with quiet():
            self.study = optuna.create_study(direction=direction, sampler=self.sampler)
        self.grid: KatibGrid | None = None
        self.service: Any = None  # a SERVICES algorithm (hyperband): a batch per request
        self.batch: list[list[dict[str, str]]] = []  # the service's answer, unstarted
        self.told: dict[str, int] = {}  # trial name -> grid id, told to Optuna
        self.exhausted = False  # a grid with no point left (katib.grid.end)
        if spec.algorithm == "grid":
            from optuna.distributions import CategoricalDistribution

            seed = spec.settings.get("random_state")
            self.grid = KatibGrid(spec.params, None if seed is None else int(seed))
            self.dists = {name: CategoricalDistribution(vals)
                          for name, vals in self.grid.values.items()}
        elif spec.algorithm in tuning_search.SERVICES:
            module = tuning_search.SERVICES[spec.algorithm]
            self.service = module.Hyperband(
                spec.settings, spec.params, spec.name,
                spec.objective.type == "maximize", spec.objective.metric)
            self.dists = tuning_search.recording_distributions(spec.params, spec.settings)
        else:
            self.dists = distributions(spec.params)

    def seed(self, trials: list[dict[str, Any]]) -> None:
        """A restarted experiment's earlier trials, told to the sampler as Katib's
        suggestion services see them (every request carries all of the experiment's
        trials: pkg/suggestion/v1beta1/internal/trial.py `Trial.convert`)."""
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        for trial in trials:
            given = {a["name"]: a["value"] for a in trial["spec"]["parameterAssignments"]}
            params: dict[str, Any] = {}
            for name, dist in self.dists.items():
                raw = given.get(name)
                if isinstance(dist, CategoricalDistribution):
                    params[name] = next((c for c in dist.choices if str(c) == raw), raw)
                elif isinstance(dist, IntDistribution):
                    params[name] = int(float(raw or 0))
                else:
                    params[name] = float(raw or 0)
            if self.grid is not None:
                trial["_grid_id"] = next((g for g in range(len(self.grid)) if {
                    k: str(v) for k, v in self.grid.assignment(g).items()} == given), None)
            value = tuning_status.trial_objective(trial)
            with quiet(), contextlib.suppress(ValueError):
                if tuning_status.trial_state(trial) in METRIC_STATES and is_float(value):
                    self.study.add_trial(optuna.trial.create_trial(
                        params=params, distributions=self.dists, value=float(value)))
                    if trial.get("_grid_id") is not None:
                        self.told[trial["metadata"]["name"]] = trial["_grid_id"]
                else:
                    self.study.add_trial(optuna.trial.create_trial(
                        params=params, distributions=self.dists,
                        state=optuna.trial.TrialState.FAIL))

    def ask(self, trials: list[dict[str, Any]]
            ) -> tuple[Any, list[dict[str, str]], int | None] | None:
        """The next trial's (Optuna trial, assignments, grid point), or None when there is
        none to give now (a service's batch is used up, a grid has no point left)."""
        if self.service is not None:
            from optuna.distributions import CategoricalDistribution

            if not self.batch:
                return None
            assignments = self.batch.pop(0)
            self.study.enqueue_trial({a["name"]: a["value"] if isinstance(
                self.dists[a["name"]], CategoricalDistribution) else float(a["value"])
                for a in assignments})
            with quiet():
                return self.study.ask(fixed_distributions=self.dists), assignments, None
        grid_id = None
        if self.grid is not None:
            if len(trials) >= len(self.grid):
                self.exhausted = True  # katib.grid.end: Katib would re-run points
                return None
            asked = [t["_grid_id"] for t in trials]
            told = set(self.told.values())
            finished = [g for g in asked if g in told]
            grid_id = self.grid.next(finished, [g for g in asked if g not in finished])
            self.study.enqueue_trial(self.grid.assignment(grid_id))
        with quiet():
            otrial = self.study.ask(fixed_distributions=self.dists)
        return otrial, [{"name": p.name, "value": fmt(otrial.params[p.name])}
                        for p in self.spec.params], grid_id

    def tell(self, name: str, number: int, grid_id: int | None, state: str,
             value: Any) -> None:
        """A finished trial: Succeeded and EarlyStopped ones with their objective, every
        other as failed."""
        import optuna

        with quiet():
            if state in METRIC_STATES and is_float(value):
                self.study.tell(number, float(value))
                if grid_id is not None:
                    self.told[name] = grid_id
            else:
                self.study.tell(number, state=optuna.trial.TrialState.FAIL)

    def request(self, count: int, trials: list[dict[str, Any]]) -> None:
        """One request of Katib's controller to a service: its batch of assignments, or
        hyperband.NoSuggestion (the batch is then empty)."""
        self.batch = []
        self.batch = self.service.suggest(count, trials)
