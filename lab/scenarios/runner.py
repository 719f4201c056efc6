"""Run scenarios: auto mode (solve, then check, step by step) and test mode (the invariant:
each step's checks fail before its solution and pass after)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab import state
from lab.backends import Choice, get_backend
from lab.errors import LabError
from lab.kube.conditions import now
from lab.scenarios import actions, availability, checks
from lab.scenarios.context import Context, tool_env
from lab.scenarios.model import Scenario, Step

Sink = Callable[[dict[str, Any]], None]


@dataclass
class CheckResult:
    label: str
    type: str
    ok: bool
    message: str
    observed: str
    seconds: float
    failed: str | None = None  # the resource failed, and why (never "not yet")


@dataclass
class StepResult:
    id: str
    title: str
    status: str = "skipped"  # passed | failed | error | skipped
    seconds: float = 0.0
    checks: list[CheckResult] = field(default_factory=list)
    before: list[CheckResult] | None = None  # test mode: results before the solution
    actions: list[str] = field(default_factory=list)
    error: str | None = None
    skip_reason: str | None = None  # set when a precondition (`needs`) does not hold


@dataclass
class ScenarioResult:
    id: str
    title: str
    mode: str
    backend: str
    started_at: str
    status: str = "passed"
    seconds: float = 0.0
    workdir: str = ""
    steps: list[StepResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Passed, or skipped for a stated reason (e.g. no GPU): neither is a failure."""
        return self.status in ("passed", "skipped")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def copy_assets(scenario: Scenario, workdir: Path) -> None:
    """Put the scenario's starting files in the work folder (never overwriting a file)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if not scenario.assets.is_dir():
        return
    for src in sorted(scenario.assets.rglob("*")):
        dest = workdir / src.relative_to(scenario.assets)
        if src.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif not dest.exists():
            shutil.copy2(src, dest)


def run_checks(step: Step, ctx: Context, *, wait: bool, budget: float | None = None,
               sink: Sink | None = None,
               on_wait: Callable[[str, checks.Outcome, float, float], None] | None = None,
               ) -> list[CheckResult]:
    """Evaluate every check of a step (all of them, so the learner sees every gap).
    `on_wait(label, outcome, waited, timeout)` is told while a check waits."""
    results = []
    for check in step.checks:
        t0 = time.monotonic()
        if budget is not None and wait:
            check = dataclasses.replace(check, timeout=min(check.timeout, budget))
        told = None if on_wait is None else (
            lambda o, waited, limit, label=check.label: on_wait(label, o, waited, limit))
        outcome = checks.evaluate(check, ctx, wait=wait, on_wait=told)
        res = CheckResult(check.label, check.type, outcome.ok, check.message, outcome.observed,
                          round(time.monotonic() - t0, 3), outcome.failed)
        results.append(res)
        if sink:
            sink({"event": "check", "step": step.id, "result": res})
    return results


def unmet_needs(step: Step, ctx: Context) -> str | None:
    """Why a step cannot run here (its first precondition that does not hold), or None. A
    need for one of kflab's extras is answered as `scenario list` answers it
    (availability.import_unmet: kflab's own Python, which runs the step's commands too), with
    the command that installs the extra."""
    from lab.scenarios.availability import import_unmet

    for need in step.needs:
        if need.params.get("extra"):
            if why := import_unmet(need):
                return why
            continue
        outcome = checks.evaluate(need, ctx, wait=False)
        if not outcome.ok:
            return f"{need.message} ({outcome.observed})"
    return None


def solve_step(step: Step, ctx: Context, sink: Sink | None = None) -> list[str]:
    """Run a step's reference solution; raises LabError naming the failing action."""
    done = []
    for action in step.solve:
        if sink:
            sink({"event": "action", "step": step.id, "verb": action.verb, "args": action.args})
        try:
            done.append(actions.ACTION_TYPES[action.verb].run(ctx, action.args))
        except LabError as exc:
            raise LabError(f"solve action '{action.verb}' ({action.where}) failed: {exc}") \
                from exc
    return done


@contextlib.contextmanager
def sandbox(state_root: Path, scenario: Scenario) -> Iterator[tuple[Path, Path]]:
    """Fresh state and work folders for one unattended run of a scenario:
    `<state>/sandboxes/<id>/<time>-<pid>-<random>/{state,work}`, locked while the run lasts.

    Each run has its own sandbox, so two runs of one scenario at once (two terminals, a CI
    matrix) never share or delete each other's files. A finished run's sandbox stays for
    inspection until the next run of that scenario removes it; one still in use (its lock
    held by a live process) is never removed.
    """
    base = state.path(state_root, "sandboxes", scenario.id)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    run = state.path(state_root, "sandboxes", scenario.id,
                     f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}")
    lock = state.path(state_root, "sandboxes", f"{scenario.id}.lock")
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        with state.held(lock):  # no run starts while another prunes
            for old in sorted(base.iterdir()):
                if old.is_dir() and not old.is_symlink() and \
                        not state.in_use(old / "run.lock"):
                    state.remove(state_root, state.confine(state_root, old))
            run.mkdir()
            stack.enter_context(state.held(
                state.path(state_root, "sandboxes", scenario.id, run.name, "run.lock")))
        yield run / "state", run / "work"


def scenario_backend(choice: Choice, state_root: Path, *, unattended: bool) -> Any:
    """The backend a scenario acts on. On a cluster, scenario solutions apply as their own
    field manager and take over fields (a solution replaces the learner's attempt); unattended
    runs use `<lab namespace>-auto`, emptied first, so they never touch a learner's work."""
    if choice.name != "cluster":
        return get_backend(choice, str(state_root))
    from lab.config import lab_namespace
    from lab.kube.objects import MANAGER_SCENARIO

    namespace = f"{lab_namespace()}-auto" if unattended else None
    backend = get_backend(choice, str(state_root), namespace=namespace,
                          manager=MANAGER_SCENARIO)
    backend.force = True
    return backend


def skipped(scenario: Scenario, mode: str, backend: str, reason: str) -> ScenarioResult:
    """A result for a scenario that cannot run on `backend`: every step skipped, with why."""
    result = ScenarioResult(scenario.id, scenario.title, mode, backend, now(), status="skipped")
    result.steps = [StepResult(s.id, s.title, skip_reason=reason) for s in scenario.steps]
    return result


def run_scenario(scenario: Scenario, state_root: Path, *, mode: str = "auto",
                 sink: Sink | None = None, backend: Choice | str = "local") -> ScenarioResult:
    """Run every step unattended in a sandbox; `mode='test'` also checks the invariant."""
    if mode not in ("auto", "test"):
        raise ValueError(mode)
    choice = backend if isinstance(backend, Choice) else Choice(backend)
    why = scenario.why_not(choice.name)
    if why:
        return skipped(scenario, mode, choice.name, why)
    with sandbox(state_root, scenario) as (sandbox_state, workdir):
        return _run_in(scenario, sandbox_state, workdir, mode, sink, choice)


def _run_in(scenario: Scenario, sandbox_state: Path, workdir: Path, mode: str,
            sink: Sink | None, choice: Choice) -> ScenarioResult:
    runner_backend = scenario_backend(choice, sandbox_state, unattended=True)
    runner_backend.sink = sink
    missing = getattr(runner_backend, "unavailable", lambda _: None)(scenario.requires)
    if missing:
        return skipped(scenario, mode, choice.name, missing)
    if hasattr(runner_backend, "clear"):
        runner_backend.clear()
    ctx = Context(runner_backend, workdir, tool_env(sandbox_state, runner_backend),
                  scenario.root)
    copy_assets(scenario, workdir)
    result = ScenarioResult(scenario.id, scenario.title, mode, runner_backend.name, now(),
                            workdir=str(workdir))
    t_start = time.monotonic()
    steps = [StepResult(s.id, s.title) for s in scenario.steps]
    result.steps = steps
    skip_reason = None
    try:
        for step, res in zip(scenario.steps, steps, strict=True):
            if sink:
                sink({"event": "step-started", "step": step.id, "title": step.title})
            t0 = time.monotonic()
            skip_reason = availability.skip_reason(step, skip_reason,
                                                   lambda s: unmet_needs(s, ctx))
            if skip_reason:
                res.skip_reason = skip_reason
                if sink:
                    sink({"event": "step-finished", "step": step.id, "result": res})
                continue
            try:
                if mode == "test":
                    res.before = run_checks(step, ctx, wait=False)
                    if sink:
                        sink({"event": "checks-before", "step": step.id,
                              "results": res.before})
                    early = [c for c in res.before if c.ok]
                    if early:
                        res.status = "failed"
                        res.error = ("checks pass before the solution (they cannot fail): "
                                     + ", ".join(f"{c.label} [{c.observed}]" for c in early))
                res.actions = solve_step(step, ctx, sink)
                res.checks = run_checks(step, ctx, wait=True, sink=sink)
                if res.status != "failed":
                    res.status = "passed" if all(c.ok for c in res.checks) else "failed"
            except LabError as exc:
                res.status, res.error = "error", str(exc)
            res.seconds = round(time.monotonic() - t0, 3)
            if sink:
                sink({"event": "step-finished", "step": step.id, "result": res})
            if res.status != "passed":
                break
    finally:
        runner_backend.down()
    result.seconds = round(time.monotonic() - t_start, 3)
    if all(s.status == "passed" for s in steps):
        result.status = "passed"
    elif skip_reason and all(s.status in ("passed", "skipped") for s in steps):
        result.status = "skipped"
    else:
        result.status = "failed"
    return result
