"""Sum the CPU and memory that a rendered component asks of the node.

A pod's effective request is the larger of its biggest init container and the sum of its
containers (the scheduler's rule); Deployments and StatefulSets count `replicas` pods, a
DaemonSet one pod (the lab is one node)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from lab.components.render import workloads

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DEC = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": Decimal("0.001")}


def quantity(value: str | int | float | None) -> Decimal:
    """A Kubernetes quantity ("250m", "1Gi", "0.5", "512M") as a plain number."""
    if value is None:
        return Decimal(0)
    text = str(value).strip()
    for suffix, mult in _BIN.items():
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * mult
    for suffix, mult in _DEC.items():
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * Decimal(mult)
    return Decimal(text)


@dataclass
class Footprint:
    cpu_requests: Decimal = Decimal(0)      # cores
    memory_requests: Decimal = Decimal(0)   # bytes
    cpu_limits: Decimal = Decimal(0)
    memory_limits: Decimal = Decimal(0)
    pods: int = 0
    unbounded: int = 0  # containers without a memory request (they reserve nothing)

    def __iadd__(self, other: Footprint) -> Footprint:
        for f in ("cpu_requests", "memory_requests", "cpu_limits", "memory_limits", "pods",
                  "unbounded"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self


def _pod(spec: dict[str, Any]) -> Footprint:
    fp = Footprint(pods=1)
    main = {k: Decimal(0) for k in ("rc", "rm", "lc", "lm")}
    init = dict(main)
    for group, acc, summed in ((spec.get("containers", []), main, True),
                               (spec.get("initContainers", []), init, False)):
        for c in group:
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            if summed and "memory" not in req:
                fp.unbounded += 1
            vals = {"rc": quantity(req.get("cpu")), "rm": quantity(req.get("memory")),
                    "lc": quantity(lim.get("cpu")), "lm": quantity(lim.get("memory"))}
            for k, v in vals.items():
                acc[k] = acc[k] + v if summed else max(acc[k], v)
    fp.cpu_requests, fp.memory_requests = max(main["rc"], init["rc"]), max(main["rm"], init["rm"])
    fp.cpu_limits, fp.memory_limits = max(main["lc"], init["lc"]), max(main["lm"], init["lm"])
    return fp


def footprint(objects: list[dict[str, Any]]) -> Footprint:
    total = Footprint()
    for obj in workloads(objects):
        count = 1 if obj["kind"] == "DaemonSet" else int(obj["spec"].get("replicas", 1))
        for _ in range(count):
            total += _pod(obj["spec"]["template"]["spec"])
    return total


def gib(n: Decimal) -> str:
    return f"{n / 2**30:.2f} GiB"


def lab_footprint(upstream: Path, names: tuple[str, ...] = ()) -> list[tuple[str, Footprint]]:
    """(component, footprint) rows of the lab profile (or `names` and what they need), then
    ("total", sum). GPU-only parts count only when named."""
    from lab.components.catalog import load
    from lab.components.render import render

    cat = load()
    chosen = cat.select(names) if names else [c for c in cat.components if not c.gpu_only]
    rows, total = [], Footprint()
    for comp in chosen:
        fp = footprint(render(comp.overlay, upstream))
        total += fp
        rows.append((comp.name, fp))
    return [*rows, ("total", total)]
