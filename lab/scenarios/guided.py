"""Guided mode: the learner acts, `kflab check` verifies, `kflab hint`/`kflab solve` help.

Progress is saved per scenario in `<state>/progress/<id>.json`, so a learner can stop,
close the terminal and resume where they were.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import state
from lab.backends import Choice
from lab.errors import LabError
from lab.kube.conditions import now
from lab.scenarios import journal, loader
from lab.scenarios.context import Context, tool_env
from lab.scenarios.model import Scenario, Step
from lab.scenarios.runner import CheckResult, copy_assets, run_checks, solve_step
from lab.state import read_json, write_json

RESTART = "start the scenario again with `kflab scenario start NAME --restart`"
GUIDED_WAIT = 5.0  # seconds a guided `kflab check` waits for a resource still settling


@dataclass
class Session:
    scenario: Scenario
    progress: dict[str, Any]
    state_root: Path

    @property
    def workdir(self) -> Path:
        return Path(self.progress["workdir"])

    @property
    def index(self) -> int:
        return int(self.progress["current"])

    @property
    def finished(self) -> bool:
        return self.index >= len(self.scenario.steps)

    @property
    def step(self) -> Step:
        if self.finished:
            raise LabError(f"scenario '{self.scenario.id}' is complete",
                           hint="start another with `kflab scenario start NAME`")
        return self.scenario.steps[self.index]

    def step_record(self) -> dict[str, Any]:
        return self.progress["steps"].setdefault(self.step.id, {
            "attempts": 0, "hints": 0, "solved": False, "passed_at": None})

    @property
    def backend_choice(self) -> Choice:
        """The backend the scenario was started on (saved with the progress)."""
        return Choice.from_dict(self.progress.get("backend"))

    def context(self) -> Context:
        from lab.scenarios.runner import scenario_backend

        backend = scenario_backend(self.backend_choice, self.state_root, unattended=False)
        return Context(backend, self.workdir, tool_env(self.state_root, backend),
                       self.scenario.root)

    def save(self) -> None:
        write_json(_progress_file(self.state_root, self.scenario.id), self.progress)


def _progress_file(state_root: Path, sid: str) -> Path:
    return state.path(state_root, "progress", f"{sid}.json")


def _active_file(state_root: Path) -> Path:
    return state.path(state_root, "progress", "active")


def start(scenario: Scenario, state_root: Path, workdir: Path, *, restart: bool,
          backend: Choice | None = None, explicit: bool = False) -> Session:
    """Begin (or resume) a scenario; copies the starting files without overwriting any.
    The backend is saved with the progress, so check/hint/solve act on the same one."""
    choice = backend or Choice("local")
    why = scenario.why_not(choice.name)
    if why:
        raise LabError(f"'{scenario.id}' cannot run on the {choice.name} backend: {why}",
                       hint="pick another backend with --backend")
    progress = read_json(_progress_file(state_root, scenario.id), fix=RESTART)
    journal.record(state_root, scenario.id, "resume" if progress and not restart else
                   "restart" if progress else "start")
    if progress is None or restart:
        progress = {"scenario": scenario.id, "workdir": str(workdir.resolve()), "current": 0,
                    "started_at": now(), "steps": {}, "backend": choice.to_dict()}
    elif explicit and Choice.from_dict(progress.get("backend")).name != choice.name:
        raise LabError(f"'{scenario.id}' was started on the "
                       f"{Choice.from_dict(progress.get('backend')).name} backend",
                       hint="resume it there, or begin again on this one with --restart")
    copy_assets(scenario, Path(progress["workdir"]))
    session = Session(scenario, progress, state_root)
    session.save()
    _active_file(state_root).write_text(scenario.id)
    return session


def active(state_root: Path) -> Session:
    """The scenario the learner is working on."""
    path = _active_file(state_root)
    if not path.exists():
        raise LabError("no scenario in progress", hint="start one with `kflab scenario start NAME`")
    sid = path.read_text().strip()
    progress = read_json(_progress_file(state_root, sid), fix=RESTART)
    if progress is None:
        raise LabError(f"progress of '{sid}' is missing", hint=f"run `kflab scenario start {sid}`")
    return Session(loader.find(sid), progress, state_root)


def check(session: Session, wait: float = GUIDED_WAIT) -> tuple[bool, list[CheckResult]]:
    """Verify the current step; on success advance to the next one."""
    record = session.step_record()
    record["attempts"] += 1
    # A step's preconditions come first, so a learner without (say) a GPU is told so.
    step = dataclasses.replace(session.step, checks=session.step.needs + session.step.checks)
    results = run_checks(step, session.context(), wait=True, budget=wait)
    ok = all(r.ok for r in results)
    journal.record(session.state_root, session.scenario.id, "check", session.step.id, ok=ok)
    if ok:
        record["passed_at"] = now()
        session.progress["current"] = session.index + 1
    session.save()
    return ok, results


def hint(session: Session) -> tuple[int, int, str | None]:
    """The next hint of the current step: (number, total, text or None when none left)."""
    record = session.step_record()
    hints = session.step.hints
    if record["hints"] >= len(hints):
        return len(hints), len(hints), None
    record["hints"] += 1
    session.save()
    journal.record(session.state_root, session.scenario.id, "hint", session.step.id,
                   n=record["hints"])
    return record["hints"], len(hints), hints[record["hints"] - 1]


def solve(session: Session) -> list[str]:
    """Run the reference solution of the current step (the learner's files are kept)."""
    # Logged before it runs: a solution that fails half-way has still shown the learner code.
    journal.record(session.state_root, session.scenario.id, "solve", session.step.id)
    done = solve_step(session.step, session.context())
    session.step_record()["solved"] = True
    session.save()
    return done
