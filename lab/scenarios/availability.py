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


def _gpu_shortfall(need: Check,
                   gpus: Callable[[], tuple[list[tuple[int, int] | None], str]]) -> str | None:
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


def cannot_run_here(scenario: Scenario,
                    gpus: Callable[[], tuple[list[tuple[int, int] | None], str]] = _local_gpus,
                    ) -> str | None:
    """Why some step of `scenario` cannot run on this machine (its need's message), or None."""
    for n, step in enumerate(scenario.steps, 1):
        where = "" if len(scenario.steps) == 1 else f"step {n} ({step.title}) "
        for need in step.needs:
            if need.type == "gpus" and (short := _gpu_shortfall(need, gpus)):
                return f"{where}{need.message} ({short})"
            modules = imported_modules(need)
            if modules and any(_missing(m) for m in modules):
                return f"{where}{need.message}"
    return None
