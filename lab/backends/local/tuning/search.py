"""Katib algorithms as Optuna samplers, and the search space as Optuna distributions.

Katib v0.19 (the lab's katib-config) serves random and tpe with hyperopt, grid and
multivariate-tpe with Optuna, cmaes and sobol with goptuna, bayesianoptimization with
scikit-optimize; locally every one runs on the pinned Optuna with Katib's settings names.
sobol is Optuna's QMC sampler with a Sobol sequence; bayesianoptimization is mapped to
Optuna's Gaussian-process sampler. Grid order is Katib's own (tuning/grid.py).
Algorithms whose Katib service is restated whole (SERVICES: hyperband) answer a batch
of assignments per controller request, as Katib's do; Optuna only records their trials.

Optuna's own warnings (FutureWarning for deprecated arguments, ExperimentalWarning) never
reach the terminal: `quiet()` captures them; what matters to a user is said once, in
kflab's words (e.g. cmaes restarts, see `restart_note`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lab.backends.local.tuning import grid as katib_grid
from lab.backends.local.tuning import hyperband
from lab.backends.local.tuning.space import Param

if TYPE_CHECKING:
    import optuna

# algorithm -> accepted algorithmSettings names (Katib's, plus the hyperopt/skopt spellings).
SETTINGS: dict[str, tuple[str, ...]] = {
    "random": ("random_state",),
    "grid": ("random_state",),
    "tpe": ("random_state", "n_startup_trials", "n_ei_candidates", "n_EI_candidates",
            "gamma", "prior_weight"),
    "multivariate-tpe": ("random_state", "n_startup_trials", "n_ei_candidates"),
    "cmaes": ("random_state", "sigma", "restart_strategy"),
    "sobol": ("random_state",),
    "bayesianoptimization": ("random_state", "n_initial_points", "base_estimator", "acq_func",
                             "acq_optimizer"),
}
# Katib suggestion services restated in their own module: each has `validate(settings,
# params, parallel)` returning Katib's message, `unreadable(params)` (a space the service
# fails on at every request), `ignored(settings)`, and a service class
# whose `suggest(count, trials)` answers one controller request.
SERVICES: dict[str, Any] = {"hyperband": hyperband}
INT_SETTINGS = {"random_state", "n_startup_trials", "n_ei_candidates", "n_EI_candidates",
                "n_initial_points"}
FLOAT_SETTINGS = {"gamma", "prior_weight", "sigma"}
# Settings that configure scikit-optimize internals Optuna's GP sampler has no knob for.
UNMAPPED = {"acq_func", "acq_optimizer"}
RESTART_STRATEGIES = ("ipop", "bipop", "none")


def check_settings(algorithm: str, settings: dict[str, str], params: tuple[Param, ...],
                   max_trials: int | None, parallel: int = 3) -> str | None:
    """'field: problem' for a setting or search space the algorithm cannot take, else None."""
    if algorithm in SERVICES:
        message = SERVICES[algorithm].validate(settings, params, parallel)
        if message is None:
            failing = SERVICES[algorithm].unreadable(params)
            return None if failing is None else (
                f"spec.parameters: Katib's {algorithm} service reads discrete values as "
                f"integers and fails every request ({failing}), so on a cluster the "
                "Experiment stays Running with no trial; use integer values or a double "
                "parameter")
        # Katib marks the Suggestion Failed with this text, then the Experiment Failed.
        return f"spec.algorithm.algorithmSettings: {message} (Katib's {algorithm} " \
               f"service: 'Validation failed: ValidateAlgorithmSettings Error: {message}')"
    allowed = SETTINGS[algorithm]
    for i, (key, value) in enumerate(settings.items()):
        fld = f"spec.algorithm.algorithmSettings[{i}]"
        if key not in allowed:
            return f"{fld}.name: unknown setting '{key}' for {algorithm} " \
                   f"(known: {', '.join(allowed)})"
        try:
            number = int(value) if key in INT_SETTINGS else (
                float(value) if key in FLOAT_SETTINGS else None)
        except ValueError:
            return f"{fld}.value: '{value}' is not a number"
        if number is not None and number < 0:
            return f"{fld}.value: {key} must be >= 0"
        # goptuna serves cmaes in Katib v0.19 and takes ipop, bipop or none, nothing else
        # (kubeflow/katib pkg/suggestion/v1beta1/goptuna/converter.go `toGoptunaSampler`).
        if key == "restart_strategy" and value not in RESTART_STRATEGIES:
            return f"{fld}.value: restart_strategy '{value}' is not one of ipop, bipop, " \
                   "none (Katib's cmaes service refuses anything else)"
        if key == "base_estimator" and value != "GP":
            return f"{fld}.value: only base_estimator GP is available locally " \
                   "(Optuna's Gaussian-process sampler)"
    if algorithm == "cmaes" and sum(p.type in ("int", "double") for p in params) < 2:
        return "spec.parameters: cmaes needs at least two int or double parameters"
    if algorithm == "grid":
        for i, p in enumerate(params):
            if p.type == "double" and p.step is None:
                return f"spec.parameters[{i}].feasibleSpace.step: grid needs a step for " \
                       f"double parameter '{p.name}'"
        size = katib_grid.size(params)
        if max_trials is not None and max_trials > size:
            return f"spec.maxTrialCount: {max_trials} is more than the {size} points of the grid"
    return None


def distributions(params: tuple[Param, ...]) -> dict[str, Any]:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    out: dict[str, Any] = {}
    for p in params:
        if p.values:
            out[p.name] = CategoricalDistribution(list(p.values))
            continue
        assert p.min is not None and p.max is not None
        log = p.distribution in ("logUniform", "logNormal")
        if p.type == "int":
            step = 1 if log else int(p.step or 1)  # Optuna: no step on a log scale
            high = int(p.min) + (int(p.max) - int(p.min)) // step * step
            out[p.name] = IntDistribution(int(p.min), high, step=step, log=log)
        elif p.step and not log:
            high = p.min + math.floor((p.max - p.min) / p.step + 1e-9) * p.step
            out[p.name] = FloatDistribution(p.min, high, step=p.step)
        else:
            out[p.name] = FloatDistribution(p.min, p.max, log=log)
    return out


def distribution_notes(params: tuple[Param, ...], algorithm: str) -> list[str]:
    """Where a declared distribution is sampled differently here than by Katib."""
    notes: list[str] = []
    if algorithm in SERVICES:  # Katib's own sampling rules, restated: nothing differs
        return notes
    for i, p in enumerate(params):
        where = f"spec.parameters[{i}].feasibleSpace"
        if algorithm == "grid" and p.distribution != "uniform":
            notes.append(f"{where}.distribution: the grid visits every step, "
                         f"'{p.distribution}' has no effect")
        elif p.distribution in ("normal", "logNormal"):
            notes.append(f"{where}.distribution: Optuna has no {p.distribution} prior; "
                         f"sampled {'log-' if p.distribution == 'logNormal' else ''}"
                         "uniformly between min and max")
        elif p.distribution == "logUniform" and p.step:
            notes.append(f"{where}.step: not used with logUniform (Optuna has no stepped "
                         "log scale)")
    return notes


def recording_distributions(params: tuple[Param, ...], settings: dict[str, str]) -> dict:
    """Distributions wide enough for any assignment a SERVICES algorithm gives (hyperband
    writes its resource budget, up to r_l, into the resource parameter whatever its
    feasibleSpace), so Optuna can record every trial for the importance plot."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    out: dict[str, Any] = {}
    resource = settings.get("resource_name")
    for p in params:
        if p.type == "categorical" and p.name != resource:
            out[p.name] = CategoricalDistribution(list(p.values))
            continue
        bounds = [float(v) for v in p.values if _is_number(v)] + \
            [v for v in (p.min, p.max) if v is not None]
        if p.name == resource:
            bounds += [0.0, float(settings.get("r_l", "0"))]
        low, high = min(bounds, default=0.0), max(bounds, default=0.0)
        out[p.name] = FloatDistribution(low, high)
    return out


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def sampler(algorithm: str, settings: dict[str, str]) -> tuple[optuna.samplers.BaseSampler,
                                                               list[str]]:
    """The Optuna sampler for a Katib algorithm, plus notes on settings left unmapped."""
    import optuna

    if algorithm in SERVICES:  # the service suggests; Optuna only records the trials
        return optuna.samplers.RandomSampler(), [
            f"spec.algorithm.algorithmSettings {k}: Katib's {algorithm} service logs it as "
            "unknown and ignores it" for k in SERVICES[algorithm].ignored(settings)]
    seed = int(settings["random_state"]) if "random_state" in settings else None
    notes = [f"spec.algorithm.algorithmSettings {k}: no Optuna equivalent, ignored"
             for k in settings if k in UNMAPPED]
    if algorithm in ("random", "grid"):  # grid: points come from tuning/grid.py
        return optuna.samplers.RandomSampler(seed=seed), notes
    if algorithm in ("tpe", "multivariate-tpe"):
        kw: dict[str, Any] = {"seed": seed, "constant_liar": True}
        if "n_startup_trials" in settings:
            kw["n_startup_trials"] = int(settings["n_startup_trials"])
        cands = settings.get("n_ei_candidates", settings.get("n_EI_candidates"))
        if cands is not None:
            kw["n_ei_candidates"] = int(cands)
        if "prior_weight" in settings:
            kw["prior_weight"] = float(settings["prior_weight"])
        if "gamma" in settings:
            frac = float(settings["gamma"])
            kw["gamma"] = lambda n: min(math.ceil(frac * n), 25)
        if algorithm == "multivariate-tpe":
            kw["multivariate"] = True
        return optuna.samplers.TPESampler(**kw), notes
    if algorithm == "cmaes":
        # restart_strategy is not passed: the pinned Optuna ignores it (restart_note says so)
        with quiet():  # sigma0 is deprecated in Optuna 4.9 but still honoured
            return optuna.samplers.CmaEsSampler(
                seed=seed, sigma0=float(settings["sigma"]) if "sigma" in settings else None,
                warn_independent_sampling=False), notes
    if algorithm == "sobol":
        with quiet():  # "experimental" since Optuna 3: noise for learners
            return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=seed is not None,
                                              seed=seed, warn_independent_sampling=False,
                                              warn_asynchronous_seeding=False), notes
    if algorithm == "bayesianoptimization":
        kw = {"seed": seed, "warn_independent_sampling": False}
        if "n_initial_points" in settings:
            kw["n_startup_trials"] = int(settings["n_initial_points"])
        return optuna.samplers.GPSampler(**kw), notes
    raise ValueError(algorithm)


def restart_note(settings: dict[str, str]) -> str | None:
    """The fidelity rule a cmaes restart_strategy falls under, if one is asked for."""
    if settings.get("restart_strategy") in ("ipop", "bipop"):
        return "katib.cmaes.restart_strategy"
    return None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Optuna's FutureWarning and ExperimentalWarning stay off the terminal: they are about
    arguments kflab passes, not about the user's Experiment."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield
