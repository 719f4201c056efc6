"""Grading a real lab's hand-in where the records alone are not enough: kserve-serving's
model servers must be started again from the student's own manifest and model files."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends import get_backend
from lab.scenarios import grading, guided, handin, loader


@pytest.mark.slow
def test_a_finished_kserve_student_is_graded_with_their_servers(state: Path,
                                                                tmp_path: Path) -> None:
    scenario = loader.find("kserve-serving")
    student_state = tmp_path / "student"
    session = guided.start(scenario, student_state, tmp_path / "work", restart=False)
    try:
        for _ in scenario.steps:
            guided.solve(session)
            ok, results = guided.check(session, wait=120)
            assert ok, results
    finally:
        get_backend("local", str(student_state)).down()  # the student closes the lab
    handin.export(student_state, [], "Kim", tmp_path / "kim.tar.gz")
    result = grading.grade(scenario, tmp_path / "kim.tar.gz", state)
    # The rollout replaced the first model under the same name: the deploy step passed in
    # the session (recorded) but its [1, 1, 1] check no longer holds on the state handed in.
    assert [s.status for s in result.steps] == ["passed", "changed", "passed", "passed",
                                                "passed"], result.result
    assert all(s.solved_by_solve for s in result.steps)
    assert any("started the student's InferenceService/iris again" in n for n in result.notes)
    assert result.status == "partial+solve"
