"""Where each student is: every lab's checks, run read-only against the student's namespace.

Only the check types that read the cluster run here (a resource's condition or field, a
workload's logs, the GPUs, a pipeline run's state through the KFP API): nothing is applied,
solved or created, and the student's files (file-exists, json-file, command and prediction
checks) stay on the student's machine, so steps checked only through them show as skipped
with that reason. Grades go through the existing grade files (lab.scenarios.gradebook), so
`kflab grade collect` merges them with hand-in grades.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.kube.conditions import now
from lab.scenarios.context import Context
from lab.scenarios.grading import Grade, StepGrade
from lab.scenarios.model import Scenario
from lab.scenarios.runner import ScenarioResult, StepResult, run_checks
from lab.teaching.class_ import ClassRecord, Seat

READ_ONLY = ("condition", "field", "logs", "gpus", "pipeline-run")
NOT_HERE = "checked only on the student's files (not on the cluster)"


@dataclass
class Cell:
    """One student x one lab."""

    seat: Seat
    scenario: Scenario
    result: ScenarioResult

    @property
    def passed(self) -> int:
        return sum(s.status == "passed" for s in self.result.steps)

    @property
    def checkable(self) -> int:
        return sum(s.status != "skipped" for s in self.result.steps)

    def text(self) -> str:
        if not self.checkable:
            return "-"
        return f"{self.passed}/{self.checkable}"


def _step(step: Any, ctx: Context) -> StepResult:
    res = StepResult(step.id, step.title)
    t0 = time.monotonic()
    for need in step.needs:
        if need.type not in READ_ONLY:
            res.skip_reason = f"precondition {need.type} {NOT_HERE}"
            return res
    if step.needs:
        pre = run_checks(dataclasses.replace(step, checks=step.needs), ctx, wait=False)
        bad = next((c for c in pre if not c.ok), None)
        if bad is not None:
            res.skip_reason = f"{bad.message} ({bad.observed})"
            return res
    ro = tuple(c for c in step.checks if c.type in READ_ONLY)
    if not ro:
        res.skip_reason = NOT_HERE
        return res
    res.checks = run_checks(dataclasses.replace(step, checks=ro), ctx, wait=False)
    res.status = "passed" if all(c.ok for c in res.checks) else "failed"
    left = len(step.checks) - len(ro)
    if left:
        res.error = f"{left} more check(s) {NOT_HERE}"
    res.seconds = round(time.monotonic() - t0, 3)
    return res


def lab_result(backend: Any, scenario: Scenario) -> ScenarioResult:
    """One lab's steps checked once, read-only, in the backend's namespace."""
    result = ScenarioResult(scenario.id, scenario.title, "class-status", "cluster", now())
    with tempfile.TemporaryDirectory(prefix="kflab-class-") as empty:
        ctx = Context(backend, Path(empty), {}, source=None)
        t0 = time.monotonic()
        result.steps = [_step(step, ctx) for step in scenario.steps]
        result.seconds = round(time.monotonic() - t0, 3)
    steps = result.steps
    result.status = ("passed" if steps and all(s.status == "passed" for s in steps) else
                     "skipped" if all(s.status in ("passed", "skipped") for s in steps) else
                     "failed")
    return result


def survey(record: ClassRecord, scenarios: list[Scenario], state: Path, *,
           kubeconfig: str | None, context: str | None,
           students: tuple[str, ...] = ()) -> list[Cell]:
    """Every (student, lab) cell of the class; `students` narrows to those ids."""
    from lab.backends.cluster import ClusterBackend

    cells = []
    for seat in record.seats:
        if students and seat.id not in students:
            continue
        backend = ClusterBackend(str(state), context=context, kubeconfig=kubeconfig,
                                 namespace=seat.namespace)
        try:
            for s in scenarios:
                cells.append(Cell(seat, s, lab_result(backend, s)))
        finally:
            backend.down()
    return cells


def to_grade(cell: Cell, server: str) -> Grade:
    """A cell as a grade (the same files `kflab scenario grade` writes)."""
    steps = [StepGrade(s.id, s.title, s.status if s.status in ("passed", "failed") else
                       "skipped") for s in cell.result.steps]
    notes = [f"graded read-only in namespace {cell.seat.namespace} on {server}"]
    notes += [f"{s.id}: {s.skip_reason}" for s in cell.result.steps if s.skip_reason]
    notes += [f"{s.id}: {s.error}" for s in cell.result.steps if s.error]
    return Grade(cell.seat.id, cell.scenario.id, cell.scenario.title,
                 f"namespace {cell.seat.namespace}", cell.result.started_at, cell.result,
                 steps, notes=notes)


HANDIN_SUFFIXES = (".tar.gz", ".tgz", ".tar", "")


def handin_of(folder: Path, seat: Seat) -> Path | None:
    """A student's hand-in in `folder`, named by their roster id (ID.tar.gz, ID.tgz, ID.tar
    or the folder ID/), or None."""
    for suffix in HANDIN_SUFFIXES:
        path = folder / f"{seat.id}{suffix}"
        if path.exists():
            return path
    return None


def rerun_grade(cell: Cell, folder: Path, state: Path) -> tuple[Grade | None, str]:
    """The cell graded by running the student's handed-in files again (`kflab scenario
    grade --rerun`), or None and why not (no hand-in, or none for this lab)."""
    from lab.errors import LabError
    from lab.scenarios.grading import grade

    source = handin_of(folder, cell.seat)
    if source is None:
        return None, f"no hand-in of {cell.seat.id} in {folder} to run again"
    try:
        return grade(cell.scenario, source, state, student=cell.seat.id, rerun=True), ""
    except LabError as exc:
        return None, f"{source} could not be run again: {str(exc).splitlines()[0]}"


def write_grades(cells: list[Cell], server: str, out: Path, *, rerun: Path | None = None,
                 state: Path | None = None) -> tuple[Path, Path, int]:
    """grades/STUDENT/LAB/ for each cell, then the class CSV and HTML of `grade collect`.
    With `rerun` (a folder of hand-ins named by student id), a student's lab is graded by
    running their handed-in files again; one with no hand-in is graded read-only from the
    namespace, with a note saying so."""
    from lab.scenarios import gradebook

    for cell in cells:
        made: Grade | None = None
        why = ""
        if rerun is not None and state is not None:
            made, why = rerun_grade(cell, rerun, state)
        if made is None:
            made = to_grade(cell, server)
            if why:
                made.notes.append(f"--rerun: {why}; graded read-only from the namespace")
        gradebook.write(made, out / cell.seat.id / cell.scenario.id)
    grades, notes = gradebook.collect([out])
    csv_path, html_path = out / "grades.csv", out / "grades.html"
    csv_path.write_text(gradebook.csv_text([gradebook.row(g) for g in grades]))
    html_path.write_text(gradebook.class_page(grades, notes))
    return csv_path, html_path, len(grades)
