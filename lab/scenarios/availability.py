"""Whether a scenario can run on this machine, said before the learner starts it: a step
that needs a GPU, or a Python extra (TensorFlow, JupyterLab) that is not installed.

Only what can be known cheaply is looked at (`scenario list` must stay fast): a `gpus` need,
and a `command` need of the form `python -c "import a, b"` (answered by the import system
without importing anything). Any other need is left to the step itself."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=1)
def _local_gpus() -> int:
    from lab.backends.local.training.env import visible_gpus

    return len(visible_gpus())


def cannot_run_here(scenario: Scenario, gpus: Callable[[], int] = _local_gpus) -> str | None:
    """Why some step of `scenario` cannot run on this machine (its need's message), or None."""
    for n, step in enumerate(scenario.steps, 1):
        where = "" if len(scenario.steps) == 1 else f"step {n} ({step.title}) "
        for need in step.needs:
            if need.type == "gpus" and gpus() < int(need.params.get("min", 1)):
                return f"{where}{need.message} ({gpus()} GPU(s) here)"
            modules = imported_modules(need)
            if modules and any(_missing(m) for m in modules):
                return f"{where}{need.message}"
    return None
