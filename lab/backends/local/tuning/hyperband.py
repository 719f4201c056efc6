"""Katib's hyperband suggestion, restated: brackets of trials that share a resource budget.

Rules read in kubeflow/katib v0.19.0 pkg/suggestion/v1beta1/hyperband/service.py
(`HyperbandService.ValidateAlgorithmSettings`, `GetSuggestions`, `_make_bracket`,
`_make_master_bracket`, `_make_child_bracket`, `_get_top_trial`, `HyperBandParam.convert`
and `generate`) and parsing_util.py (`parse_x_next_vector`), plus the controller that calls
it (pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go
`SyncAssignments`). Facts, restated in this module's own words:

- settings: r_l and resource_name are required; eta defaults to 3 (a value <= 0 becomes 3);
  validation reads eta as int(float(eta)) but the suggestions use float(eta); other names
  are logged and ignored. The service keeps its state (s_max, b_l, r, n, current_s,
  current_i, evaluating_trials) by writing them back as algorithm settings, which the
  controller passes in with the next request.
- every request overwrites n with the number of trials the controller asked for. With no
  bracket under evaluation, the *master bracket* draws n random points (numpy's unseeded
  uniform over each parameter's min..max; ints rounded, discrete values snapped to the
  nearest, a categorical value by the largest of uniform draws) and gives the resource
  parameter int(r). Otherwise a *child bracket* takes the ceil(ceil(n*eta^-i)/eta) best of
  the last `evaluating_trials` trials (by creation; the controller sends no MetricsUnavailable
  trial) and gives them int(r*eta^i); if one of
  those is not Succeeded the service raises, and the controller retries on its next pass.
- the controller refuses an answer whose length is not the number it asked for ("The
  response contains unexpected trials") and keeps the old state, so it asks again, forever:
  that includes the end of hyperband (current_s < 0), which answers nothing.

Values reach trials as Python writes them (`str`), e.g. 0.031415926535897934.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lab.backends.local.tuning.space import Param

# Katib's own texts (service.py ValidateAlgorithmSettings / suggestionclient.go).
NEED = "r_l and resource_name must be set."
BAD_RL = "r_l must be a positive float number."
NOT_IN_PARAMS = "value of resource_name setting must be in parameters."
UNEXPECTED = "The response contains unexpected trials"
NOT_COMPLETED = "There are some trials which are not completed yet for experiment %s."
STATE_NAMES = ("eta", "s_max", "r_l", "b_l", "r", "n", "current_s", "current_i",
               "resource_name", "evaluating_trials")


class NoSuggestion(Exception):
    """The service or the controller refused this request; Katib retries on its next pass."""


def validate(settings: dict[str, str], params: tuple[Param, ...], parallel: int) -> str | None:
    """Katib's ValidateAlgorithmSettings message for these settings, else None. A setting
    the service cannot read raises inside it; Katib reports that exception's text."""
    if "r_l" not in settings or "resource_name" not in settings:
        return NEED
    try:
        rl = float(settings["r_l"])
    except ValueError:
        return BAD_RL
    if rl < 0:
        return BAD_RL
    try:
        eta = int(float(settings["eta"])) if "eta" in settings else 3
        if eta <= 0:
            eta = 3
        smax = int(math.log(rl) / math.log(eta))
        max_parallel = math.ceil(eta ** smax)
    except (ValueError, ZeroDivisionError, OverflowError) as exc:
        # an exception in a Python gRPC servicer reaches the client with grpc's prefix
        return f"Exception calling application: {exc}"
    if parallel < max_parallel:
        return f"parallelTrialCount must be not less than {max_parallel}."
    if settings["resource_name"] not in {p.name for p in params}:
        return NOT_IN_PARAMS
    return None


def unreadable(params: tuple[Param, ...]) -> str | None:
    """A search space Katib's service accepts but fails on at every request (so the
    Experiment stays Running with no trial): parse_parameter_configs reads a discrete
    list with int()."""
    for p in params:
        if p.type == "discrete":
            for v in p.values:
                try:
                    int(v)
                except ValueError:
                    return f"invalid literal for int() with base 10: {v!r}"
    return None


def ignored(settings: dict[str, str]) -> list[str]:
    """Setting names Katib's hyperband logs as unknown and ignores."""
    return [k for k in settings if k not in STATE_NAMES]


@dataclass
class _State:
    eta: float = 3
    s_max: int = -1
    r_l: float = -1
    b_l: float = -1
    r: float = -1
    n: int = -1
    current_s: int = -2
    current_i: int = -1
    resource_name: str = ""
    evaluating_trials: int = 0

    @classmethod
    def read(cls, settings: dict[str, str]) -> _State:
        st = cls()
        for key, value in settings.items():
            if key in ("eta", "r_l", "b_l"):
                setattr(st, key, float(value))
            elif key in ("n", "r", "current_s", "current_i", "s_max", "evaluating_trials"):
                setattr(st, key, int(float(value)))
            elif key == "resource_name":
                st.resource_name = value
        if st.current_s == -1:  # the outer loop has ended
            return st
        if st.eta <= 0:
            st.eta = 3
        if st.s_max < 0:
            st.s_max = int(math.log(st.r_l) / math.log(st.eta))
        if st.b_l < 0:
            st.b_l = (st.s_max + 1) * st.r_l
        if st.current_s < 0:
            st.current_s = st.s_max
        if st.current_i < 0:
            st.current_i = 0
        if st.n < 0:
            st.n = st._bracket_size()
        if st.r < 0:
            st.r = st.r_l * st.eta ** (-st.current_s)
        return st

    def _bracket_size(self) -> int:
        return math.ceil(float(self.s_max + 1)
                             * (float(self.eta ** self.current_s) / float(self.current_s + 1)))

    def written(self) -> dict[str, str]:
        return {k: str(getattr(self, k)) for k in STATE_NAMES}

    def next_bracket(self) -> None:
        self.current_s -= 1
        self.current_i = 0
        if self.current_s >= 0:
            self.n = self._bracket_size()
            self.r = self.r_l * self.eta ** (-self.current_s)


class Hyperband:
    """One experiment's hyperband service plus the controller's bookkeeping around it."""

    def __init__(self, settings: dict[str, str], params: tuple[Param, ...],
                 experiment: str, maximize: bool, metric: str) -> None:
        import numpy as np

        self.settings = dict(settings)  # the Suggestion's status.algorithmSettings, merged
        self.params = params
        self.experiment = experiment
        self.maximize = maximize
        self.metric = metric
        self.rng = np.random.RandomState()  # Katib: numpy's global generator, unseeded

    def suggest(self, count: int, trials: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
        """`count` assignments, as Katib's controller would get them, or NoSuggestion."""
        try:
            return self._suggest(count, trials)
        except (ValueError, ZeroDivisionError, OverflowError, TypeError) as exc:
            # Katib's service raises on such input at every request: the controller retries
            raise NoSuggestion(f"Exception calling application: {exc}") from None

    def _suggest(self, count: int, trials: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
        st = _State.read(self.settings)
        if st.current_s < 0:
            answer: list[list[dict[str, str]]] = []
        else:
            st.n = count
            answer = self._master(st) if st.evaluating_trials == 0 else self._child(st, trials)
            st.evaluating_trials = len(answer) if st.current_i < st.current_s else 0
            if st.evaluating_trials == 0:
                st.next_bracket()
        if len(answer) != count:
            raise NoSuggestion(f"{UNEXPECTED} (asked for {count}, hyperband answered "
                               f"{len(answer)})")
        self.settings.update(st.written())  # only an accepted answer moves the state on
        return answer

    def _master(self, st: _State) -> list[list[dict[str, str]]]:
        r = int(st.r)
        return [[{"name": p.name, "value": str(r) if p.name == st.resource_name else value}
                 for p, value in zip(self.params, self._sample(), strict=True)]
                for _ in range(st.n)]

    def _sample(self) -> list[str]:
        """One uniform draw over the parameters' bounds, decoded as parse_x_next_vector."""
        import numpy as np

        lows: list[float] = []
        highs: list[float] = []
        for p in self.params:
            if p.type == "categorical":
                lows += [0] * len(p.values)
                highs += [1] * len(p.values)
            elif p.type == "discrete":
                ints = [int(v) for v in p.values]
                lows.append(min(ints))
                highs.append(max(ints))
            elif p.type == "int":
                lows.append(int(p.min or 0))
                highs.append(int(p.max or 0))
            else:
                lows.append(float(p.min or 0.0))
                highs.append(float(p.max or 0.0))
        x = self.rng.uniform([lows], [highs], size=(1, len(lows)))[0]
        out, at = [], 0
        for p in self.params:
            if p.type == "categorical":
                width = len(p.values)
                out.append(p.values[int(np.argmax(x[at:at + width]))])
                at += width
                continue
            v = x[at]
            at += 1
            if p.type == "int":
                out.append(str(int(round(v, 0))))
            elif p.type == "discrete":
                ints = [int(s) for s in p.values]
                out.append(str(min(ints, key=lambda c: abs(c - v))))
            else:
                out.append(str(float(v)))
        return out

    def _child(self, st: _State, trials: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
        from lab.backends.local.tuning import status as tuning_status

        n_i = math.ceil(st.n * st.eta ** (-st.current_i))
        top = math.ceil(n_i / st.eta)
        st.current_i += 1
        if st.current_i > st.current_s:
            st.next_bracket()
        r_i = int(st.r * st.eta ** st.current_i)
        # the controller leaves MetricsUnavailable trials out of the request (ConvertTrials)
        trials = [t for t in trials if tuning_status.trial_state(t) != "MetricsUnavailable"]
        last = trials[-st.evaluating_trials:] if len(trials) > st.evaluating_trials \
            else list(trials)
        if any(tuning_status.trial_state(t) != "Succeeded" for t in last):
            raise NoSuggestion(NOT_COMPLETED % self.experiment)

        def objective(t: dict[str, Any]) -> float:
            return float(tuning_status.trial_objective(t))

        best = sorted(last, key=objective, reverse=self.maximize)[:top]
        return [[{"name": a["name"],
                  "value": str(r_i) if a["name"] == st.resource_name else a["value"]}
                 for a in t["spec"]["parameterAssignments"]] for t in best]
