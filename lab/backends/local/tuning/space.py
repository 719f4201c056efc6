"""The search space of a Katib Experiment: its parameters and the grid they span.

Pure data and enumeration, no Optuna: both the Experiment reader (spec) and the samplers
(search) build on it, so neither needs the other's internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    min: float | None = None
    max: float | None = None
    step: float | None = None
    values: tuple[str, ...] = ()
    distribution: str = "uniform"  # uniform | logUniform | normal | logNormal


def fmt(value: Any) -> str:
    """A parameter value as Katib writes assignments: text, floats without float noise."""
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)


def grid_count(p: Param) -> int:
    """How many values a grid visits for one parameter, by arithmetic: a range of 10**12
    integers is counted, never listed."""
    if p.values:
        return len(p.values)
    assert p.min is not None and p.max is not None
    if p.type == "int":
        return len(range(int(p.min), int(p.max) + 1, int(p.step or 1)))
    if p.step is None:
        return 0
    steps = (p.max - p.min) / p.step + 1e-9
    return math.floor(steps) + 1 if math.isfinite(steps) else 2**63


def grid_size(params: tuple[Param, ...]) -> int:
    """How many points the grid over `params` has (without building it)."""
    return math.prod(grid_count(p) for p in params)
