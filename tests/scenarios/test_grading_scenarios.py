"""Grading real labs' hand-ins where the records alone are not enough: model servers and
Notebooks are started again from the student's own manifests and files, and a finished lab
whose resources the student cleaned up (as the completion panel suggests) or replaced in a
later step is graded complete, never `partial`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lab.backends import get_backend
from lab.scenarios import export, grading, guided, loader


def _finish(sid: str, student_state: Path, work: Path) -> None:
    scenario = loader.find(sid)
    session = guided.start(scenario, student_state, work, restart=False)
    for _ in scenario.steps:
        guided.solve(session)
        ok, results = guided.check(session, wait=120)
        assert ok, results


@pytest.mark.slow
def test_a_finished_kserve_student_is_complete_before_and_after_cleaning_up(
        state: Path, tmp_path: Path) -> None:
    scenario = loader.find("kserve-serving")
    student_state = tmp_path / "student"
    backend = get_backend("local", str(student_state))
    try:
        _finish("kserve-serving", student_state, tmp_path / "work")
        export.export(student_state, [], "Kim", tmp_path / "kim.tar.gz")
        # The completion panel says: stop it with `kflab delete isvc iris`. Kim does.
        assert backend.delete("InferenceService", "iris")
        export.export(student_state, [], "Kim", tmp_path / "kim-cleaned.tar.gz")
    finally:
        backend.down()  # the student closes the lab
    kept = grading.grade(scenario, tmp_path / "kim.tar.gz", state)
    # The rollout replaced the first model under the same name: the deploy step's [1, 1, 1]
    # no longer holds, and the rollout step, which passes, checks the same service.
    assert [s.label for s in kept.steps] == [
        "passed", "passed (replaced by step 'rollout')", "passed", "passed", "passed"], \
        kept.result
    assert all(s.solved_by_solve for s in kept.steps)
    assert any("started the student's InferenceService/iris again" in n for n in kept.notes)
    assert kept.status == "complete+solve"

    cleaned = grading.grade(scenario, tmp_path / "kim-cleaned.tar.gz", state)
    assert [s.label for s in cleaned.steps] == [
        "passed", "passed (cleaned up)", "passed", "passed", "passed (cleaned up)"], \
        cleaned.result
    assert cleaned.status == "complete+solve"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jupyterlab") is None,
                    reason="needs the notebooks extra (JupyterLab)")
def test_a_finished_notebook_student_gets_their_notebook_started_again(
        state: Path, tmp_path: Path) -> None:
    scenario = loader.find("notebook-to-pipeline")
    student_state = tmp_path / "student"
    try:
        _finish("notebook-to-pipeline", student_state, tmp_path / "work")
    finally:
        get_backend("local", str(student_state)).down()
    export.export(student_state, [], "Lee", tmp_path / "lee.tar.gz")
    result = grading.grade(scenario, tmp_path / "lee.tar.gz", state)
    assert any("started the student's Notebook/lab again" in n for n in result.notes), \
        result.notes
    assert result.steps[0].label == "passed", result.result
    assert result.status == "complete+solve"
