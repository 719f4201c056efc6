"""Issue 33, Why #4: a state folder moved with `mv` graded `partial` ("changed") for honest
work: the records name the folder's old place (a task's artifact), which the grade could not
find. A learner here runs a real pipeline whose check reads its model artifact, passes, then
moves the state folder (and, in the second case, the whole folder with the work in it), and
exports. The grade is `complete`; a real edit after the pass is still `changed`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab.scenarios import grading, loader
from tests.conftest import run_kflab

REPO = Path(__file__).resolve().parents[2]
SCENARIO = """\
id: one-run
title: One pipeline run and its model
level: beginner
duration: 5m
steps:
  - id: run
    title: Run the pipeline
    text: steps/run.md
    solve:
      - pipeline: {file: tiny.py, name: first}
    checks:
      - type: pipeline-run
        name: first
        state: SUCCEEDED
        artifact: {task: train, name: model}
        message: run tiny.py as 'first'
"""


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "scenarios" / "one-run"
    (folder / "steps").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "scenario.yaml").write_text(SCENARIO)
    (folder / "steps" / "run.md").write_text("Run it.\n")
    shutil.copy(REPO / "tests" / "data" / "pipelines" / "tiny.py", folder / "assets")
    monkeypatch.setenv("KFLAB_SCENARIOS", str(folder.parent))
    return folder.parent


def kflab(lab: Path, state: Path, *args: str, cwd: Path) -> str:
    out = run_kflab(*args, cwd=cwd, env={"KFLAB_SCENARIOS": str(lab), "KFLAB_STATE": str(state)})
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


@pytest.mark.parametrize("what", ["the state folder", "the whole folder"])
def test_honest_work_moved_with_mv_grades_passed(lab: Path, tmp_path: Path, what: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state = home / ".kflab"
    kflab(lab, state, "scenario", "start", "one-run", "--workdir", "work", cwd=home)
    kflab(lab, state, "pipeline", "run", "tiny.py", "--name", "first", cwd=home / "work")
    kflab(lab, state, "check", "--wait", "30", cwd=home)
    if what == "the state folder":
        state.rename(tmp_path / "elsewhere")
        state, cwd = tmp_path / "elsewhere", home
    else:
        home.rename(tmp_path / "moved")
        state, cwd = tmp_path / "moved" / ".kflab", tmp_path / "moved"
    # the learner's own `kflab check` still reads the moved model artifact...
    assert "first" in kflab(lab, state, "get", "run", "first", cwd=cwd)
    # ...and the export finds the moved work folder
    kflab(lab, state, "progress", "export", "--student", "Mo", "--out", "hand", cwd=cwd)
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    monkeypatch.setenv("KFLAB_STATE", str(teacher))
    result = grading.grade(loader.find("one-run"), cwd / "hand", teacher)
    assert [s.label for s in result.steps] == ["passed"], result.result
    assert result.status == "complete"
    # A real edit after the pass (the model artifact emptied) is still `changed`.
    records = cwd / "hand" / "state" / "pipeline-root"
    model = next(p for p in records.rglob("model") if p.is_file())
    model.write_text("")
    result = grading.grade(loader.find("one-run"), cwd / "hand", teacher)
    assert [s.label for s in result.steps] == ["changed"], result.result


def test_a_record_naming_a_path_outside_is_not_followed(lab: Path, tmp_path: Path) -> None:
    """The re-anchoring looks only inside the state folder: a record pointing at another
    folder's `pipeline-root` whose file the state folder does not hold is left as it is."""
    from lab.backends.shapes import relocate

    root = tmp_path / "state"
    (root / "pipeline-root" / "default" / "r1").mkdir(parents=True)
    (root / "pipeline-root" / "default" / "r1" / "model").write_text("w")
    assert relocate(Path("/old/place/pipeline-root/default/r1/model"), root) == \
        root / "pipeline-root" / "default" / "r1" / "model"
    assert relocate(Path("/etc/pipeline-root/passwd"), root) == \
        Path("/etc/pipeline-root/passwd")
    assert json.dumps(str(relocate(Path("relative/x"), root))) == '"relative/x"'
