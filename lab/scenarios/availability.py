"""Whether a scenario can run on this machine, said before the learner starts it: a step
that needs a GPU, or a Python extra (TensorFlow, JupyterLab) that is not installed.

Only what can be known cheaply is looked at (`scenario list` must stay fast): a `gpus` need,
and a `command` need of the form `python -c "import a, b"` (answered by the import system
without importing anything). Any other need is left to the step itself."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable

from lab.scenarios.model import Check, Scenario

_IMPORT = re.compile(r"^\s*import\s+([\w.]+(?:\s*,\s*[\w.]+)*)\s*$")


def imported_modules(need: Check) -> list[str] | None:
    """The modules a `python -c "import ..."` need imports, or None for another need."""
    argv = need.params.get("argv") or []
    if need.type != "command" or len(argv) != 3 or argv[:2] != ["python", "-c"]:
        return None
    m = _IMPORT.match(str(argv[2]))
    return [x.strip() for x in m.group(1).split(",")] if m else None


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _local_gpus() -> tuple[list[tuple[int, int] | None], str]:
    """(each GPU's compute capability, why there are fewer or none) of the local backend;
    NVML is asked once per process (gpu_devices.machine)."""
    from lab.backends.local.gpu_devices import view

    found = view()
    if found.error:
        return [], found.error
    return [g.capability for g in found.devices], found.why


GpuView = Callable[[], tuple[list[tuple[int, int] | None], str]]


def _gpu_shortfall(need: Check, gpus: GpuView) -> str | None:
    have, why = gpus()
    want = int(need.params.get("min", 1))
    if len(have) < want:
        return f"{len(have)} GPU(s) here" + (f": {why}" if why else "")
    if cap := need.params.get("capability"):
        major, _, minor = str(cap).partition(".")
        floor = (int(major), int(minor or 0))
        good = [c for c in have if c is not None and c >= floor]
        if len(good) < want:
            seen = ", ".join(sorted({f"{c[0]}.{c[1]}" if c else "unknown" for c in have}))
            return f"compute capability here: {seen}; {cap} or newer needed"
    return None


def blocked_steps(scenario: Scenario, gpus: GpuView = _local_gpus) -> list[tuple[int, str, str]]:
    """The steps this machine cannot run: (number from 1, title, its need's message)."""
    out = []
    for n, step in enumerate(scenario.steps, 1):
        for need in step.needs:
            if need.type == "gpus" and (short := _gpu_shortfall(need, gpus)):
                out.append((n, step.title, f"{need.message} ({short})"))
                break
            modules = imported_modules(need)
            if modules and any(_missing(m) for m in modules):
                out.append((n, step.title, need.message))
                break
    return out


def _numbers(ns: list[int]) -> str:
    """[1, 2, 3, 5] -> "steps 1-3, 5"; [2] -> "step 2"."""
    parts: list[str] = []
    for n in ns:
        if parts and parts[-1].split("-")[-1] == str(n - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ("step " if len(ns) == 1 else "steps ") + ", ".join(parts)


def runs_partly(scenario: Scenario, gpus: GpuView = _local_gpus) -> bool:
    """Some steps of `scenario` run on this machine and some do not."""
    blocked = blocked_steps(scenario, gpus)
    return bool(blocked) and len(blocked) < len(scenario.steps)


def cannot_run_here(scenario: Scenario, gpus: GpuView = _local_gpus) -> str | None:
    """What of `scenario` this machine cannot run, or None: each step's need's message,
    and which steps do run when some do ("steps 1-4 run here; step 5 (...) needs ...")."""
    blocked = blocked_steps(scenario, gpus)
    if not blocked:
        return None
    if len(scenario.steps) == 1:
        return blocked[0][2]
    said = "; ".join(f"step {n} ({title}) {why}" for n, title, why in blocked)
    runnable = [n for n in range(1, len(scenario.steps) + 1)
                if n not in {b[0] for b in blocked}]
    if not runnable:
        return said
    return f"{_numbers(runnable)} run here; {said}"
