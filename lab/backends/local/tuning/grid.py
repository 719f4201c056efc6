"""Katib's grid suggestion: which grid point each new trial gets, in Katib's order.

Katib v0.19 serves `grid` from its suggestion-optuna service with optuna 3.3.0 (rules read
in kubeflow/katib pkg/suggestion/v1beta1/optuna/base_service.py `_create_sampler` and
pkg/suggestion/v1beta1/internal/search_space.py `convert_to_combinations`; optuna v3.3.0
optuna/samplers/_grid.py `GridSampler.infer_relative_search_space` and
`_get_unvisited_grid_ids`). Facts, restated:

- the grid is the product of every parameter's values, parameters sorted by name; an int
  parameter gives range(min, max + 1, step), a double numpy.arange(min, max + step, step)
  without a last value above max, a categorical or discrete one its list;
- the sampler's generator is numpy's RandomState seeded by `random_state` (unseeded when it
  is not set, so each run visits another order);
- each new trial takes `choice()` among the grid ids neither finished nor running, in the
  order Python iterates that set; finished means told to Optuna, which Katib does only for
  Succeeded and EarlyStopped trials (pkg/suggestion/v1beta1/internal/trial.py
  `Trial.convert`), so a failed trial's point stays "running" and is never retried;
- values reach the trial as Python writes the float (`str`), e.g. 0.019999999999999997.

The pinned optuna (5.x) shuffles once with a fixed seed instead, so this module keeps
Katib's rule itself rather than using today's GridSampler.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from lab.backends.local.tuning.space import Param


def values(p: Param) -> list[str]:
    """One parameter's grid values, written as Katib writes them into assignments."""
    if p.values:
        return list(p.values)
    assert p.min is not None and p.max is not None
    if p.type == "int":
        return [str(v) for v in range(int(p.min), int(p.max) + 1, int(p.step or 1))]
    if p.step is None:
        return []
    import numpy as np

    points = np.arange(p.min, p.max + p.step, p.step)
    if len(points) and points[-1] > p.max:
        points = points[:-1]
    return [str(float(v)) for v in points]


def count(p: Param) -> int:
    """How many values `values(p)` has, by arithmetic (a huge range is never listed)."""
    if p.values:
        return len(p.values)
    assert p.min is not None and p.max is not None
    if p.type == "int":
        return len(range(int(p.min), int(p.max) + 1, int(p.step or 1)))
    if p.step is None:
        return 0
    steps = (p.max - p.min) / p.step
    if not math.isfinite(steps):
        return 2**62
    if steps > 10**6:  # far over any limit: counted, not built
        return math.floor(steps + 1e-9) + 1
    return len(values(p))


def size(params: tuple[Param, ...]) -> int:
    return math.prod(count(p) for p in params)


class KatibGrid:
    """Hands out grid points in the order Katib's grid suggestion would."""

    def __init__(self, params: tuple[Param, ...], seed: int | None) -> None:
        import numpy as np

        self.names = sorted(p.name for p in params)
        by_name = {p.name: p for p in params}
        self.values = {n: values(by_name[n]) for n in self.names}
        self.points = list(itertools.product(*(self.values[n] for n in self.names)))
        self.rng = np.random.RandomState(seed)

    def __len__(self) -> int:
        return len(self.points)

    def next(self, finished: list[int], running: list[int]) -> int:
        """The grid id for a new trial, given the ids of told and of other asked trials."""
        n = len(self.points)
        candidates = set(range(n)) - set(finished) - set(running)
        if not candidates:  # every point started: optuna re-runs one not yet finished
            candidates = set(range(n)) - set(finished)
        pool = list(candidates) or list(range(n))
        return int(self.rng.choice(pool))

    def assignment(self, grid_id: int) -> dict[str, Any]:
        return dict(zip(self.names, self.points[grid_id], strict=True))
