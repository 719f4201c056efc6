"""Grade a student's hand-in: run a scenario's checks against their state and their files.

Nothing of the reference solution runs: no solve action is called, the context has no
scenario folder to copy from, and the checks act on a sandbox holding only the student's
copied state and work folder (`KFLAB_STATE` of any command a check runs points there too), so
the instructor's own state can neither help nor hurt a student.

Each step is graded on the state the student handed in. What the student's session recorded
(attempts, hints, `kflab solve`, when a step passed) comes from their progress and journal.
A step whose checks fail now although the session recorded it as passed is explained where
the hand-in shows why: what it checked no longer exists (the student cleaned up as the lab
suggested: "passed (cleaned up)"), or a later step that passes now checks the same resource
(kserve-serving's rollout replaces the first model: "passed (replaced by step 'rollout')").
Either counts as passed, so a finished lab is never `partial`. Otherwise the step is
`changed` (the work was edited after it passed, or the records were); the instructor decides.
Every grade carries integrity signals (lab.scenarios.integrity): signals, not proof.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import __version__
from lab.backends import get_backend
from lab.errors import LabError
from lab.kube.conditions import now
from lab.scenarios import gradebook, integrity, runner
from lab.scenarios import handin as handins
from lab.scenarios.context import Context, tool_env
from lab.scenarios.model import Scenario
from lab.scenarios.plots import experiment_plots
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
    # why a step that passed in the session counts although its checks fail now:
    # "cleaned up" or "replaced by step 'ID'"
    how: str | None = None

    @property
    def label(self) -> str:
        """What a person reads: `passed (cleaned up)`, `failed`..."""
        return f"{self.status} ({self.how})" if self.how else self.status


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
    signals: list[str] = field(default_factory=list)  # integrity signals, not proof
    fingerprint: dict[str, Any] = field(default_factory=dict)  # compared across a class
    mode: str = "records"  # records: checks read the hand-in; rerun: its files run again

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
                "time_spent_s": self.time_spent_s,
                "signals": len(self.signals)}

    def to_dict(self) -> dict[str, Any]:
        from lab.scenarios.report import result_dict

        return {"kind": "kflab-grade", "format": FORMAT, "kflab": __version__,
                "student": self.student, "scenario": self.scenario, "title": self.title,
                "handin": self.handin, "graded_at": self.graded_at, "mode": self.mode,
                "exported_at": self.exported_at, "started_at": self.started_at,
                "last_activity": self.last_activity, "summary": self.summary(),
                "steps": [{**asdict(s), "label": s.label} for s in self.steps],
                "notes": self.notes, "signals": self.signals,
                "fingerprint": self.fingerprint,
                "plots": [{"experiment": p["experiment"], "name": p["name"]}
                          for p in self.plots],
                "result": result_dict(self.result)}


def grade(scenario: Scenario, source: Path, state_root: Path, *, student: str | None = None,
          student_state: Path | None = None, wait: float = 0.0, rerun: bool = False) -> Grade:
    """Grade one hand-in for `scenario`; the grading sandbox lives under `state_root`.
    With `rerun`, each step's status comes from running the student's handed-in files again
    in a fresh state folder (`_rerun`), not from their records."""
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
        notes = list(handin.notes)
        fingerprint = integrity.fingerprint(scenario, sb_state, sb_work)
        copies = integrity.solution_copies(scenario, sb_work)
        t0 = time.monotonic()
        if rerun:
            result, plots = _rerun(scenario, sb_work, sb_state.parent / "rerun", graded_at)
            gone: list[list[tuple[str, str, str]] | None] = [None] * len(result.steps)
            notes.append("graded with --rerun: the student's handed-in files were run again, "
                         "step by step, in a fresh state folder (the lab's solve actions "
                         "without its solution files); their run records were not used")
        else:
            backend = get_backend("local", str(sb_state))
            # No `source`: a `copy` solve action could not find a reference file if called.
            ctx = Context(backend, sb_work, grading_env(sb_state, backend), source=None)
            result = ScenarioResult(scenario.id, scenario.title, "grade", backend.name,
                                    graded_at, workdir=str(sb_work))
            try:
                notes += restart_servers(backend, sb_work)
                result.steps = [_check_step(step, ctx, wait) for step in scenario.steps]
                gone = [_absent(step, res, backend) for step, res in
                        zip(scenario.steps, result.steps, strict=True)]
            finally:
                backend.down()
            plots = experiment_plots(sb_state)
        result.seconds = round(time.monotonic() - t0, 3)
    owner_hits = integrity.owner_solves(handin.owner_records)
    steps = [_step_grade(res, handin) for res in result.steps]
    _explain(scenario, steps, result.steps, gone)
    _mark_owner_solves(scenario, steps, owner_hits)
    result.status = ("passed" if all(s.status == "passed" for s in steps) else
                     "skipped" if all(s.status in ("passed", "skipped") for s in steps) else
                     "failed")
    started, last, spent = _times(handin)
    signals = integrity.signals(scenario, handin, steps, spent, owner_hits)
    signals += integrity.copy_signals(copies, steps)
    fingerprint["journal_head"] = _journal_head(handin.events)
    return Grade(handin.student, scenario.id, scenario.title, handin.source, graded_at, result,
                 steps, started, last, spent, handin.exported_at, notes, plots, signals,
                 fingerprint, "rerun" if rerun else "records")


def _rerun(scenario: Scenario, work: Path, base: Path,
           graded_at: str) -> tuple[ScenarioResult, list[dict[str, Any]]]:
    """Run the student's files again, step by step, in a fresh state folder: each step's
    solve actions (apply their manifest, run their pipeline, their command, a prediction)
    but never `copy` (the lab's solution files: the student's own file stands), then its
    checks, which read only what this run made. The same confinement as every grade: a
    sandbox under the instructor's state folder, KFLAB_STATE pointing there, no cluster
    settings from the instructor's shell."""
    fresh_state, fresh_work = base / "state", base / "work"
    fresh_state.mkdir(parents=True)
    shutil.copytree(work, fresh_work, symlinks=True)  # regular files only (unpack's copy)
    backend = get_backend("local", str(fresh_state))
    ctx = Context(backend, fresh_work, grading_env(fresh_state, backend), source=None)
    result = ScenarioResult(scenario.id, scenario.title, "rerun", backend.name, graded_at,
                            workdir=str(fresh_work))
    try:
        result.steps = [_rerun_step(step, ctx) for step in scenario.steps]
    finally:
        backend.down()
    return result, experiment_plots(fresh_state)


def _rerun_step(step: Any, ctx: Context) -> StepResult:
    from lab.scenarios.actions import ACTION_TYPES

    res = StepResult(step.id, step.title)
    t0 = time.monotonic()
    why = unmet_needs(step, ctx)
    if why:
        res.skip_reason = why
        return res
    for action in step.solve:
        if action.verb == "copy":
            res.actions.append(f"kept the student's {action.args.get('to')} (the lab's "
                               "solution file is not used)")
            continue
        try:
            res.actions.append(ACTION_TYPES[action.verb].run(ctx, action.args))
        except (LabError, OSError, subprocess.SubprocessError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            res.error = f"{action.verb} ({action.where}) failed on the student's files: {first}"
            break
    res.checks = run_checks(step, ctx, wait=res.error is None)
    res.status = "passed" if res.error is None and all(c.ok for c in res.checks) else "failed"
    res.seconds = round(time.monotonic() - t0, 3)
    return res


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


def _absent(step: Any, res: StepResult, backend: Any) -> list[tuple[str, str, str]] | None:
    """The resources a step's failing checks read, when every one of them is absent from
    the hand-in (None when a check fails for another reason)."""
    failing = [c for c, r in zip(step.checks, res.checks, strict=False) if not r.ok]
    if not failing:
        return None
    found = []
    for check in failing:
        targets = integrity.check_targets(check)
        try:
            if not targets or any(backend.get(*t) is not None for t in targets):
                return None
        except LabError:
            return None
        found += targets
    return found


def _explain(scenario: Scenario, steps: list[StepGrade], results: list[StepResult],
             gone: list[list[tuple[str, str, str]] | None]) -> None:
    """A `changed` step (its checks fail now, the session recorded a pass), explained where
    the hand-in shows why: cleaned up (what it checked is gone, and is of a kind the lab tells
    learners to delete: `cleanup:` in scenario.yaml) or replaced by a later step that passes
    now and checks the same resource count as passed. A missing resource of any other kind
    (a PipelineRun, an Experiment, a job: no lab asks to delete one) grades failed."""
    from lab.kube.kinds import lookup

    for i, (sg, res) in enumerate(zip(steps, results, strict=True)):
        if sg.status != "changed":
            continue
        step = scenario.steps[i]
        failing = {t for c, r in zip(step.checks, res.checks, strict=False) if not r.ok
                   for t in integrity.check_targets(c)}
        later = next((scenario.steps[j].id for j in range(i + 1, len(steps))
                      if steps[j].status == "passed" and failing and failing <= {
                          t for c in scenario.steps[j].checks
                          for t in integrity.check_targets(c)}), None)
        absent = gone[i]
        kinds = set()
        for kind, _, _ in absent or []:
            try:
                kinds.add(lookup(kind).kind)
            except LabError:
                kinds.add(kind)
        if absent and kinds <= set(scenario.cleanup):
            sg.status, sg.how = "passed", "cleaned up"
        elif later is not None:
            sg.status, sg.how = "passed", f"replaced by step '{later}'"
        elif absent:
            what = ", ".join(sorted({f"{kind} '{name}'" for kind, name, _ in absent}))
            sg.status, sg.how = "failed", f"no {what} in the hand-in"


def _mark_owner_solves(scenario: Scenario, steps: list[StepGrade],
                       hits: list[tuple[str, str]]) -> None:
    """Mark `kflab solve` on the steps whose checks read a resource that an owner record says
    `kflab solve` made (progress and journal may have been edited; owner records say it too)."""
    from lab.kube.kinds import lookup

    made = set()
    for resource, _ in hits:
        plural, ns, name = [*resource.split("/"), "", "", ""][:3]
        try:
            made.add((lookup(plural).kind, name, ns))
        except LabError:
            continue
    for sg, step in zip(steps, scenario.steps, strict=True):
        targets = set()
        for c in step.checks:
            for kind, name, ns in integrity.check_targets(c):
                try:
                    targets.add((lookup(kind).kind, name, ns))
                except LabError:
                    continue
        if targets & made:
            sg.solved_by_solve = True


def _step_grade(res: StepResult, handin: handins.HandIn) -> StepGrade:
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


SERVER_KINDS = ("InferenceService", "Notebook")  # records of a process, not the process


def restart_servers(backend: Any, workdir: Path) -> list[str]:
    """Start the student's model servers and Notebooks again (their own manifests and
    files): a hand-in carries the record of a server, not the running process."""
    notes = []
    for kind in SERVER_KINDS:
        try:
            services = backend.list(kind)
        except LabError as exc:
            notes.append(f"could not read the student's {kind}s: {exc}")
            continue
        for obj in services:
            meta = obj.get("metadata") or {}
            clean = {"apiVersion": obj.get("apiVersion"), "kind": kind,
                     "metadata": {k: meta[k] for k in ("name", "namespace", "labels",
                                                       "annotations") if k in meta},
                     "spec": obj.get("spec")}
            name = f"{kind}/{meta.get('name')}"
            try:
                backend.apply(clean, base_dir=workdir, wait=True)
                notes.append(f"started the student's {name} again from their manifest and "
                             "files")
            except LabError as exc:
                notes.append(f"the student's {name} did not start again: "
                             f"{str(exc).splitlines()[0]}")
    return notes


def _journal_head(events: list[dict[str, Any]]) -> str | None:
    """The hash of the journal's first chained entry, when that entry carries its random
    nonce (journal.record): only then is it one learner's own. Without it (a journal
    from before the nonce) two learners who started in the same second share it."""
    chained = [e for e in events if isinstance(e.get("hash"), str)]
    if chained and isinstance(chained[0].get("nonce"), str):
        return str(chained[0]["hash"])
    return None


def rerun_all(paths: list[Path], state_root: Path) -> list[str]:
    """Grade again with --rerun each hand-in whose grade under
    `paths` was made from its records, into the same grade folder; returns what was done.
    A hand-in that is no longer where it was graded from is an error naming it: nothing of
    the class is collected from a mix the instructor did not ask for."""
    from lab.scenarios.loader import find

    done = []
    for path in gradebook.find_grades(paths):
        data = gradebook.load(path)
        if data.get("mode") == "rerun":
            continue
        source = Path(str(data.get("handin") or ""))
        if not str(data.get("handin") or "").startswith("/") or not source.exists():
            raise LabError(f"{path}: its hand-in {data.get('handin')!r} is no longer there, "
                           "so it cannot be run again",
                           hint="put the hand-in back, or grade it again with `kflab "
                                "scenario grade NAME --work HANDIN --rerun`")
        result = grade(find(str(data.get("scenario"))), source, state_root,
                       student=str(data.get("student")), rerun=True)
        gradebook.write(result, path.parent)
        s = result.summary()
        done.append(f"reran {result.student} / {result.scenario}: {s['status']} "
                    f"({s['steps_passed']}/{s['steps_total']})")
    return done
