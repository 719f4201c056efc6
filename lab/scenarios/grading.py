"""Grade a student's hand-in: run a scenario's checks against their state and their files.

Nothing of the reference solution runs: no solve action is called, the context has no
scenario folder to copy from, and the checks act on a sandbox holding only the student's
copied state and work folder (`KFLAB_STATE` of any command a check runs points there too), so
the instructor's own state can neither help nor hurt a student.

Each step is graded on the state the student handed in. What the student's session recorded
(attempts, hints, `kflab solve`, when a step passed) comes from their progress and journal.
A step whose checks fail now although the session recorded it as passed is reported as
`changed`: a later step may have replaced what it checked (kserve-serving's rollout replaces
the first model), or the records were edited; the instructor decides.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import __version__
from lab.backends import get_backend
from lab.errors import LabError
from lab.kube.conditions import now
from lab.scenarios import handin as handins
from lab.scenarios import runner
from lab.scenarios.context import Context, tool_env
from lab.scenarios.htmlreport import experiment_plots
from lab.scenarios.model import Scenario
from lab.scenarios.runner import ScenarioResult, StepResult, run_checks, unmet_needs

FORMAT = 1


@dataclass
class StepGrade:
    id: str
    title: str
    status: str  # passed | failed | changed | skipped
    attempts: int = 0
    hints: int = 0
    solved_by_solve: bool = False
    passed_in_session: str | None = None  # when `kflab check` passed it, if it did


@dataclass
class Grade:
    student: str
    scenario: str
    title: str
    handin: str
    graded_at: str
    result: ScenarioResult
    steps: list[StepGrade]
    started_at: str | None = None
    last_activity: str | None = None
    time_spent_s: int | None = None
    exported_at: str | None = None
    notes: list[str] = field(default_factory=list)
    plots: list[dict[str, Any]] = field(default_factory=list)  # {experiment, name, png(bytes)}

    @property
    def steps_passed(self) -> int:
        return sum(s.status == "passed" for s in self.steps)

    @property
    def solved_steps(self) -> list[str]:
        return [s.id for s in self.steps if s.solved_by_solve]

    @property
    def status(self) -> str:
        """complete: every step verified; partial: some; failed: none; skipped: no step could
        be graded here (a precondition such as a GPU does not hold on this machine). `+solve`
        when the student ran `kflab solve` on any step (what it did may be what is verified)."""
        skipped = sum(s.status == "skipped" for s in self.steps)
        if self.steps and skipped == len(self.steps):
            base = "skipped"
        elif self.steps and self.steps_passed == len(self.steps):
            base = "complete"
        else:
            base = "partial" if self.steps_passed else "failed"
        return base + ("+solve" if self.solved_steps else "")

    def summary(self) -> dict[str, Any]:
        return {"steps_total": len(self.steps), "steps_passed": self.steps_passed,
                "steps_skipped": sum(s.status == "skipped" for s in self.steps),
                "status": self.status,
                "attempts": sum(s.attempts for s in self.steps),
                "hints": sum(s.hints for s in self.steps),
                "solved_by_solve": self.solved_steps,
                "time_spent_s": self.time_spent_s}

    def to_dict(self) -> dict[str, Any]:
        from lab.scenarios.report import result_dict

        return {"kind": "kflab-grade", "format": FORMAT, "kflab": __version__,
                "student": self.student, "scenario": self.scenario, "title": self.title,
                "handin": self.handin, "graded_at": self.graded_at,
                "exported_at": self.exported_at, "started_at": self.started_at,
                "last_activity": self.last_activity, "summary": self.summary(),
                "steps": [asdict(s) for s in self.steps], "notes": self.notes,
                "plots": [{"experiment": p["experiment"], "name": p["name"]}
                          for p in self.plots],
                "result": result_dict(self.result)}


def grade(scenario: Scenario, source: Path, state_root: Path, *, student: str | None = None,
          student_state: Path | None = None, wait: float = 0.0) -> Grade:
    """Grade one hand-in for `scenario`; the grading sandbox lives under `state_root`."""
    graded_at = now()
    with runner.sandbox(state_root, scenario) as (sb_state, sb_work):
        sb_state.mkdir(parents=True, exist_ok=True)
        handin = handins.unpack(source, scenario.id, sb_state, sb_work, student=student,
                                student_state=student_state)
        if handin.backend != "local":
            raise LabError(f"{source}: {handin.student} did '{scenario.id}' on the "
                           f"{handin.backend} backend: that work lives in the cluster, not in "
                           "the hand-in", hint="grade hand-ins of work done on the local "
                           "backend (docs/grading.md)")
        backend = get_backend("local", str(sb_state))
        # No `source`: a `copy` solve action could not find a reference file even if called.
        ctx = Context(backend, sb_work, grading_env(sb_state, backend), source=None)
        result = ScenarioResult(scenario.id, scenario.title, "grade", backend.name, graded_at,
                                workdir=str(sb_work))
        notes = list(handin.notes)
        t0 = time.monotonic()
        try:
            notes += restart_servers(backend, sb_work)
            result.steps = [_check_step(step, ctx, wait) for step in scenario.steps]
        finally:
            backend.down()
        result.seconds = round(time.monotonic() - t0, 3)
        plots = experiment_plots(sb_state)
    steps = [_step_grade(scenario, res, handin) for res in result.steps]
    result.status = ("passed" if all(s.status == "passed" for s in steps) else
                     "skipped" if all(s.status in ("passed", "skipped") for s in steps) else
                     "failed")
    started, last, spent = _times(handin)
    return Grade(handin.student, scenario.id, scenario.title, handin.source, graded_at, result,
                 steps, started, last, spent, handin.exported_at, notes, plots)


def grading_env(sandbox_state: Path, backend: Any) -> dict[str, str]:
    """The environment of commands a check runs: the sandbox's state on the local backend,
    whatever the instructor's own shell selects (a cluster context, another namespace)."""
    from lab.backends import CONTEXT_ENV, ENV_VAR, NAMESPACE_ENV

    env = tool_env(sandbox_state, backend)
    for key in (CONTEXT_ENV, NAMESPACE_ENV, "KUBECONFIG"):
        env.pop(key, None)
    env[ENV_VAR] = "local"
    return env


def _check_step(step: Any, ctx: Context, wait: float) -> StepResult:
    res = StepResult(step.id, step.title)
    t0 = time.monotonic()
    why = unmet_needs(step, ctx)
    if why:
        res.skip_reason = why
        return res
    # The student's work is finished: a check looks once (or for `wait` seconds at most).
    res.checks = run_checks(step, ctx, wait=wait > 0, budget=wait)
    res.status = "passed" if all(c.ok for c in res.checks) else "failed"
    res.seconds = round(time.monotonic() - t0, 3)
    return res


def _step_grade(scenario: Scenario, res: StepResult, handin: handins.HandIn) -> StepGrade:
    rec = handin.progress["steps"].get(res.id, {})
    journal_solved = any(e.get("event") == "solve" and e.get("step") == res.id
                         for e in handin.events)
    status = res.status
    if status == "failed" and rec.get("passed_at"):
        status = "changed"
    elif res.skip_reason:
        status = "skipped"
    return StepGrade(res.id, res.title, status, rec.get("attempts", 0), rec.get("hints", 0),
                     bool(rec.get("solved")) or journal_solved, rec.get("passed_at"))


def _times(handin: handins.HandIn) -> tuple[str | None, str | None, int | None]:
    """When the student started, their last recorded action, and the wall time between."""
    stamps = [handin.progress.get("started_at")]
    stamps += [s.get("passed_at") for s in handin.progress["steps"].values()]
    stamps += [e.get("t") for e in handin.events]
    parsed = sorted(t for t in map(_parse, stamps) if t is not None)
    if not parsed:
        return None, None, None
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (parsed[0].strftime(fmt), parsed[-1].strftime(fmt),
            int((parsed[-1] - parsed[0]).total_seconds()))


def _parse(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def restart_servers(backend: Any, workdir: Path) -> list[str]:
    """Start the student's InferenceServices again (their own manifest and model files): a
    hand-in carries the record of a model server, not the running process."""
    notes = []
    try:
        services = backend.list("InferenceService")
    except LabError as exc:
        return [f"could not read the student's InferenceServices: {exc}"]
    for obj in services:
        meta = obj.get("metadata") or {}
        clean = {"apiVersion": obj.get("apiVersion"), "kind": "InferenceService",
                 "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations")
                              if k in meta},
                 "spec": obj.get("spec")}
        name = f"InferenceService/{meta.get('name')}"
        try:
            backend.apply(clean, base_dir=workdir, wait=True)
            notes.append(f"started the student's {name} again from their manifest and model "
                         "files")
        except LabError as exc:
            notes.append(f"the student's {name} did not start again: "
                         f"{str(exc).splitlines()[0]}")
    return notes
