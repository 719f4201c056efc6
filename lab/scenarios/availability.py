"""Whether a scenario can run on this machine, said before the learner starts it: a step
that needs a GPU, or a Python extra (TensorFlow, JupyterLab) that is not installed.

Only what can be known cheaply is looked at (`scenario list` must stay fast): a `gpus` need,
and a `command` need of the form `python -c "import a, b"` (answered by the import system
without importing anything). Any other need is left to the step itself."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable

from lab.deps import install_extras
from lab.scenarios.model import Check, Scenario, Step

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


def import_unmet(need: Check, assume: frozenset[str] = frozenset(), *,
                 advice: bool = True) -> str | None:
    """Why an import need does not hold here -- its message, and with `advice` the command
    that installs its extra when it names one -- or None when it holds or is not an import
    need. A need whose extra is in `assume` holds (what runs once that extra is installed)."""
    modules = imported_modules(need)
    if not modules or not any(_missing(m) for m in modules):
        return None
    extra = need.params.get("extra")
    if extra in assume:
        return None
    return f"{need.message}: {install_extras(extra)}" if extra and advice else need.message


StepNeeds = Callable[[Step], str | None]


def skip_reason(step: Step, earlier: str | None, unmet: StepNeeds) -> str | None:
    """Why `step` is skipped, or None when it runs: its own first unmet need; else, when an
    earlier step was skipped, that step's reason -- a step builds on the steps before it
    (the TFJob of step 2 runs the script step 1 could not). `scenario list` and every run
    (`scenario run`, `demo`, grading) decide by this one rule."""
    return unmet(step) or earlier


def _here(gpus: GpuView, assume: frozenset[str], advice: bool) -> StepNeeds:
    """This machine's answer for a step's own needs, as far as it is cheap to know."""
    def unmet(step: Step) -> str | None:
        for need in step.needs:
            if need.type == "gpus" and (short := _gpu_shortfall(need, gpus)):
                return f"{need.message} ({short})"
            if why := import_unmet(need, assume, advice=advice):
                return why
        return None
    return unmet


def _blocked(scenario: Scenario, gpus: GpuView, assume: frozenset[str],
             advice: bool) -> list[tuple[int, str, str | None, int]]:
    """(number, title, its own unmet need or None, the step whose need it inherits) of each
    step skipped here, by `skip_reason`."""
    own = _here(gpus, assume, advice)
    out: list[tuple[int, str, str | None, int]] = []
    origin = 0
    for n, step in enumerate(scenario.steps, 1):
        mine = own(step)
        if skip_reason(step, f"step {origin}" if origin else None, lambda _, m=mine: m):
            origin = n if mine else origin
            out.append((n, step.title, mine, origin))
    return out


def blocked_steps(scenario: Scenario, gpus: GpuView = _local_gpus,
                  assume: frozenset[str] = frozenset(),
                  advice: bool = True) -> list[tuple[int, str, str]]:
    """The steps this machine cannot run: (number from 1, title, why), `why` being the
    step's own unmet need or "builds on step N" for one skipped after step N's."""
    return [(n, title, why or f"builds on step {origin}")
            for n, title, why, origin in _blocked(scenario, gpus, assume, advice)]


def _said(blocked: list[tuple[int, str, str | None, int]]) -> str:
    """"step 1 (T) needs X; steps 2-3 build on it"."""
    parts: list[str] = []
    inherited: list[int] = []
    for i, (n, title, why, origin) in enumerate(blocked):
        if why:
            parts.append(f"step {n} ({title}) {why}")
            continue
        inherited.append(n)
        nxt = blocked[i + 1] if i + 1 < len(blocked) else None
        if nxt is None or nxt[2] or nxt[3] != origin:
            verb = "builds" if len(inherited) == 1 else "build"
            parts.append(f"{_numbers(inherited)} {verb} on step {origin}")
            inherited = []
    return "; ".join(parts)


def _extras_wanted(scenario: Scenario) -> list[str]:
    """The extras whose absence blocks a step of `scenario`, in step order."""
    found = [need.params["extra"] for step in scenario.steps for need in step.needs
             if need.params.get("extra") and import_unmet(need, advice=False)]
    return list(dict.fromkeys(found))


def _numbers(ns: list[int]) -> str:
    """[1, 2, 3, 5] -> "steps 1-3, 5"; [2] -> "step 2"."""
    parts: list[str] = []
    for n in ns:
        if parts and parts[-1].split("-")[-1] == str(n - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ("step " if len(ns) == 1 else "steps ") + ", ".join(parts)


def _run(ns: list[int]) -> str:
    """"step 2 runs" / "steps 1-3 run"."""
    return f"{_numbers(ns)} {'runs' if len(ns) == 1 else 'run'}"


def runs_partly(scenario: Scenario, gpus: GpuView = _local_gpus) -> bool:
    """Some steps of `scenario` run on this machine and some do not."""
    blocked = blocked_steps(scenario, gpus)
    return bool(blocked) and len(blocked) < len(scenario.steps)


def cannot_run_here(scenario: Scenario, gpus: GpuView = _local_gpus) -> str | None:
    """What of `scenario` this machine cannot run, or None: each step's own unmet need,
    which steps do run ("steps 1-3 run here; step 4 (...) needs ..."), and which would with
    the missing extras, with the one command that installs them. Skips are decided by
    `skip_reason`, the rule every run of the scenario follows."""
    blocked = _blocked(scenario, gpus, frozenset(), advice=False)
    if not blocked:
        return None
    wanted = _extras_wanted(scenario)
    gained: list[int] = []
    if wanted:
        still = {b[0] for b in _blocked(scenario, gpus, frozenset(wanted), advice=False)}
        gained = [b[0] for b in blocked if b[0] not in still]
    if len(scenario.steps) == 1:
        said = blocked[0][2] or ""
    else:
        said = _said(blocked)
        runnable = [n for n in range(1, len(scenario.steps) + 1)
                    if n not in {b[0] for b in blocked}]
        if runnable:
            said = f"{_run(runnable)} here; {said}"
    if gained:
        kind = "extra" if len(wanted) == 1 else "extras"
        who = "it runs" if len(scenario.steps) == 1 else _run(gained)
        said += f"; {who} here with the {' and '.join(wanted)} {kind}: {install_extras(*wanted)}"
    return said
