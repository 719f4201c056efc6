"""Guided mode: the learner acts, `kflab check` verifies, `kflab hint`/`kflab solve` help.

Progress is saved per scenario in `<state>/progress/<id>.json`, so a learner can stop,
close the terminal and resume where they were.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import hashchain, state
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
    notes: list[str] = dataclasses.field(default_factory=list)  # said once, at start

    @property
    def workdir(self) -> Path:
        return locate_workdir(self.progress, self.state_root)

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
        """Write the progress, with the journal's head as it is now (lab.hashchain: an
        anchor grading checks the journal against)."""
        mark = hashchain.anchor(self.state_root, self.scenario.id)
        if mark is not None:
            self.progress["journal"] = {"head": mark["head"], "n": mark["n"]}
        write_json(_progress_file(self.state_root, self.scenario.id), self.progress)


def locate_workdir(progress: dict[str, Any], state_root: Path) -> Path:
    """The work folder of a session; when it is gone because the learner moved the state
    folder together with it (`mv home elsewhere`), where it is now: at the same place
    relative to the state folder's parent as when the lab started (progress `state`)."""
    workdir = Path(str(progress.get("workdir", "")))
    old = progress.get("state")
    if workdir.is_dir() or not isinstance(old, str) or not old.startswith("/"):
        return workdir
    old_parent, new_parent = Path(old).parent, Path(state_root).resolve().parent
    if old_parent != new_parent and workdir.is_relative_to(old_parent):
        moved = new_parent / workdir.relative_to(old_parent)
        if moved.is_dir():
            return moved
    return workdir


def _progress_file(state_root: Path, sid: str) -> Path:
    return state.path(state_root, "progress", f"{sid}.json")


def _active_file(state_root: Path) -> Path:
    return state.path(state_root, "progress", "active")


def default_workdir(scenario: Scenario, state_root: Path, given: Path | None) -> Path:
    """Where the learner's files go: the folder given, else the one saved with the progress
    (so `start` from another folder resumes there instead of nesting a new one), else
    ./<id>."""
    if given is not None:
        return given
    saved = read_json(_progress_file(state_root, scenario.id), fix=RESTART)
    if saved and saved.get("workdir"):
        return Path(saved["workdir"])
    return Path(scenario.id)


def move_aside(workdir: Path) -> Path | None:
    """Keep a work folder's files under `<folder>.before-restart[-N]` so a restarted lab
    begins from the starting files (and cannot pass on the old attempt's files)."""
    if not workdir.is_dir() or not any(workdir.iterdir()):
        return None
    n = 1
    while (kept := workdir.with_name(f"{workdir.name}.before-restart"
                                     f"{'' if n == 1 else f'-{n}'}")).exists():
        n += 1
    workdir.rename(kept)
    return kept


def start(scenario: Scenario, state_root: Path, workdir: Path | None, *, restart: bool,
          backend: Choice | None = None, explicit: bool = False) -> Session:
    """Begin (or resume) a scenario; copies the starting files without overwriting any.
    The backend is saved with the progress, so check/hint/solve act on the same one.
    With `restart`, the old work folder is moved aside first (Session.notes says where)."""
    choice = backend or Choice("local")
    why = scenario.why_not(choice.name)
    if why:
        raise LabError(f"'{scenario.id}' cannot run on the {choice.name} backend: {why}",
                       hint="pick another backend with --backend")
    progress = read_json(_progress_file(state_root, scenario.id), fix=RESTART)
    journal.record(state_root, scenario.id, "resume" if progress and not restart else
                   "restart" if progress else "start")
    notes: list[str] = []
    if progress is None or restart:
        folder = default_workdir(scenario, state_root, workdir).resolve()
        if restart and (kept := move_aside(folder)) is not None:
            notes.append(f"your earlier files are kept in {kept}")
        progress = {"scenario": scenario.id, "workdir": str(folder), "current": 0,
                    "started_at": now(), "steps": {}, "backend": choice.to_dict(),
                    "state": str(state_root.resolve())}
    elif explicit and Choice.from_dict(progress.get("backend")).name != choice.name:
        raise LabError(f"'{scenario.id}' was started on the "
                       f"{Choice.from_dict(progress.get('backend')).name} backend",
                       hint="resume it there, or begin again on this one with --restart")
    elif workdir is not None and workdir.resolve() != Path(progress["workdir"]):
        notes.append(f"resuming in {progress['workdir']} (where it was started); "
                     "--restart --workdir DIR begins again elsewhere")
    progress["workdir"] = str(locate_workdir(progress, state_root))
    copy_assets(scenario, Path(progress["workdir"]))
    if (other := _other_in_progress(state_root, scenario.id)) is not None:
        notes.append(f"{other[0]} stays in progress: `kflab check` in {other[1]} checks it, "
                     "anywhere else this lab")
    session = Session(scenario, progress, state_root, notes)
    session.save()
    _active_file(state_root).write_text(scenario.id)
    return session


def where_now(state_root: Path) -> dict[str, str] | None:
    """The scenario and step in progress ({"scenario", "step"}), None when none is: what a
    `kflab apply` is recorded under, so `kflab check` shows only its own step's warnings."""
    try:
        session = active(state_root)
        return {"scenario": session.scenario.id, "step": session.step.id}
    except (LabError, OSError, ValueError, KeyError, IndexError):
        return None


def active(state_root: Path, cwd: Path | None = None) -> Session:
    """The scenario the learner is working on: the one whose work folder holds the current
    folder (as git finds its repository), else the one started last."""
    sid = lab_of_folder(state_root, cwd or Path.cwd())
    path = _active_file(state_root)
    if sid is None:
        if not path.exists():
            raise LabError("no scenario in progress",
                           hint="start one with `kflab scenario start NAME`")
        sid = path.read_text().strip()
    progress = read_json(_progress_file(state_root, sid), fix=RESTART)
    if progress is None:
        raise LabError(f"progress of '{sid}' is missing", hint=f"run `kflab scenario start {sid}`")
    return Session(loader.find(sid), progress, state_root)


def check(session: Session, wait: float = GUIDED_WAIT,
          on_wait: Any = None) -> tuple[bool, list[CheckResult]]:
    """Verify the current step; on success advance to the next one. `on_wait(label,
    outcome, waited, timeout)` hears about a check still waiting (for a live line)."""
    record = session.step_record()
    record["attempts"] += 1
    # A step's preconditions come first, so a learner without (say) a GPU is told so.
    step = dataclasses.replace(session.step, checks=session.step.needs + session.step.checks)
    results = run_checks(step, session.context(), wait=True, budget=wait, on_wait=on_wait)
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
    journal.record(session.state_root, session.scenario.id, "hint", session.step.id,
                   hint=record["hints"])
    session.save()
    return record["hints"], len(hints), hints[record["hints"] - 1]


def solve(session: Session) -> list[str]:
    """Run the reference solution of the current step (the learner's files are kept). A
    step whose needs this machine lacks is never "solved" by weakening it: skip it."""
    missing = unmet(session)
    if missing is not None:
        raise LabError(f"step '{session.step.title}' cannot run here: {missing}",
                       hint="`kflab skip` moves past it (recorded as skipped, not solved)")
    # Logged before it runs: a solution that fails half-way has still shown the learner code.
    entry = journal.record(session.state_root, session.scenario.id, "solve", session.step.id)
    # What the solution starts (in this process or in a command it runs) is marked in its
    # owner record with this entry's hash (lab.backends.local.owners).
    saved = os.environ.get(hashchain.SOLVE_ENV)
    os.environ[hashchain.SOLVE_ENV] = entry or "unrecorded"
    try:
        done = [line for text in solve_step(session.step, session.context())
                for line in text.splitlines()]
    except LabError as exc:
        raise _with_starting_files(exc, session) from exc
    finally:
        if saved is None:
            os.environ.pop(hashchain.SOLVE_ENV, None)
        else:
            os.environ[hashchain.SOLVE_ENV] = saved
    session.step_record()["solved"] = True
    session.save()
    return done


def _with_starting_files(exc: LabError, session: Session) -> LabError:
    """A failed solution that ran the learner's own files (step 1 of a lab often runs the
    starting file as it is): the error, with which of them differ from the lab's starting
    files and the command that takes a starting copy back."""
    assets = session.scenario.root / "assets"
    changed = []
    for asset in sorted(assets.rglob("*")) if assets.is_dir() else []:
        mine = session.workdir / asset.relative_to(assets)
        try:
            if asset.is_file() and mine.is_file() and mine.read_bytes() != asset.read_bytes():
                changed.append((asset, mine))
        except OSError:
            continue
    if not changed:
        return exc
    names = ", ".join(str(m.relative_to(session.workdir)) for _, m in changed)
    asset, mine = changed[0]
    hint = (f"the solution runs your files, and {names} differ(s) from the lab's starting "
            f"files: fix {'it' if len(changed) == 1 else 'them'}, or take the starting copy "
            f"back (keep yours first if you want it): cp {shlex.quote(str(asset))} "
            f"{shlex.quote(str(mine))}")
    return LabError(str(exc), hint=f"{exc.hint}; or {hint}" if exc.hint else hint)


def unmet(session: Session, index: int | None = None) -> str | None:
    """Why step `index` (default: the current one) cannot run on this machine -- its first
    precondition (`needs`) that does not hold -- or None."""
    from lab.scenarios.runner import unmet_needs

    step = session.scenario.steps[session.index if index is None else index]
    return unmet_needs(step, session.context()) if step.needs else None


def unmet_steps(session: Session) -> list[tuple[int, str]]:
    """(index, why) of every step from the current one on whose needs are unmet."""
    if session.finished:
        return []
    found = []
    for i in range(session.index, len(session.scenario.steps)):
        why = unmet(session, i)
        if why is not None:
            found.append((i, why))
    return found


def skip(session: Session) -> str:
    """Move past a step whose needs are unmet; recorded as skipped with the reason. Any other
    step is refused: it can be done here (`kflab hint`, `kflab solve`)."""
    why = unmet(session)
    if why is None:
        raise LabError(f"step '{session.step.title}' can be done on this machine, so it "
                       "cannot be skipped",
                       hint="`kflab hint` helps; `kflab solve` shows the reference solution")
    journal.record(session.state_root, session.scenario.id, "skip", session.step.id, why=why)
    record = session.step_record()
    record["skipped"] = why
    session.progress["current"] = session.index + 1
    session.save()
    return why


def step_status(session: Session, index: int) -> str:
    """passed, solved (passed after `kflab solve`), skipped, current or todo."""
    step = session.scenario.steps[index]
    record = session.progress["steps"].get(step.id) or {}
    if index < session.index:
        if record.get("skipped"):
            return "skipped"
        return "solved" if record.get("solved") else "passed"
    return "current" if index == session.index else "todo"


def progress_of(state_root: Path, sid: str) -> dict[str, Any] | None:
    """The saved progress of a scenario (None when never started); never raises on a
    broken file: a listing must still list."""
    try:
        return read_json(_progress_file(state_root, sid), fix=RESTART)
    except (LabError, OSError):
        return None


def _other_in_progress(state_root: Path, sid: str) -> tuple[str, Path] | None:
    """The lab started last before `sid`, with its folder, when it is not finished."""
    other = active_id(state_root)
    if other is None or other == sid:
        return None
    try:
        progress = read_json(_progress_file(state_root, other), fix=RESTART)
        if not isinstance(progress, dict) or int(progress.get("current", 0)) >= len(
                loader.find(other).steps):
            return None
        return other, locate_workdir(progress, state_root)
    except (LabError, OSError, ValueError, TypeError):
        return None


def lab_of_folder(state_root: Path, folder: Path) -> str | None:
    """The started scenario whose work folder is `folder` or holds it (the innermost when
    folders nest), None when it is in none; a progress file that cannot be read is passed
    over here (the commands that read it say what is wrong)."""
    try:
        here = folder.resolve()
        files = sorted(state.path(state_root, "progress").glob("*.json"))
    except OSError:
        return None
    best: tuple[int, str] | None = None
    for file in files:
        try:
            progress = read_json(file, fix=RESTART)
            if not isinstance(progress, dict) or not progress.get("workdir"):
                continue
            workdir = locate_workdir(progress, state_root).resolve()
        except (LabError, OSError, ValueError):
            continue
        if here.is_relative_to(workdir) and (best is None or len(workdir.parts) > best[0]):
            best = (len(workdir.parts), file.stem)
    return best[1] if best else None


def active_id(state_root: Path) -> str | None:
    path = _active_file(state_root)
    try:
        return path.read_text().strip() or None if path.exists() else None
    except OSError:
        return None


# kinds whose resources keep running (or keep a process or pods) after a step passed
_LONG_LIVED = ("InferenceService", "Notebook", "Experiment", "PyTorchJob", "TFJob", "TrainJob",
               "PipelineRun")
# kinds that serve until deleted: named as still running whatever their status
_SERVERS = {"InferenceService": "model server", "Notebook": "notebook server"}


def still_running(session: Session) -> list[tuple[str, str]]:
    """What the scenario left running on its backend, with the command that stops each:
    servers always (model and notebook servers serve until deleted), runs only while
    unfinished (a TrainJob ends Complete, the others Succeeded). One made before this lab
    started is named as such: it is not this lab's."""
    from lab.backends import failures
    from lab.kube.conditions import is_true
    from lab.kube.kinds import lookup

    backend = session.context().backend
    flag = "" if backend.name == "local" else f" --backend {backend.name}"
    started = str(session.progress.get("started_at") or "")
    found = []
    for kind in _LONG_LIVED:
        try:
            items = backend.list(kind, "default")
        except (LabError, OSError):
            continue
        for obj in items:
            status = obj.get("status") or {}
            done = (is_true(status, "Succeeded") or is_true(status, "Complete") or
                    status.get("state") in ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED") or
                    failures.reason(obj) is not None)
            if kind not in _SERVERS and done:
                continue
            name = obj["metadata"]["name"]
            short = lookup(kind).short[-1] if kind == "InferenceService" else kind.lower()
            what = f"{_SERVERS.get(kind, kind)} {name}"
            made = str(obj["metadata"].get("creationTimestamp") or "")
            if started and made and made < started:
                what += " (made before this lab started)"
            found.append((what, f"kflab delete {short} {name}{flag}"))
    return found
