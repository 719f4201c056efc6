"""Guided mode across separate CLI processes (stop and resume), auto/test modes, reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lab.scenarios import loader, report
from lab.scenarios.runner import run_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"


@pytest.fixture
def scenarios_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("KFLAB_SCENARIOS", str(DATA))
    return {"KFLAB_SCENARIOS": str(DATA)}


def test_guided_flow_with_hints_solve_and_resume(kflab, state: Path, tmp_path: Path,
                                                 scenarios_env) -> None:
    work = tmp_path / "work"
    out = kflab("scenario", "start", "hello-files", "--workdir", str(work), env=scenarios_env)
    assert out.returncode == 0, out.stderr
    assert "step 1/2" in out.stdout and (work / "count.py").exists()

    failed = kflab("check", "--wait", "0", env=scenarios_env)
    assert failed.returncode == 1 and "greeting.txt must contain 'hello'" in failed.stdout

    assert "Hint 1/2" in kflab("hint", env=scenarios_env).stdout
    assert "Hint 2/2" in kflab("hint", env=scenarios_env).stdout
    assert "No more hints" in kflab("hint", env=scenarios_env).stdout

    (work / "greeting.txt").write_text("hello there\n")  # the learner does the step
    passed = kflab("check", env=scenarios_env)
    assert passed.returncode == 0 and "step 2/2" in passed.stdout

    # A new process (a new terminal) resumes at step 2; starting again does not reset it.
    again = kflab("scenario", "start", "hello-files", env=scenarios_env)
    assert "step 2/2" in again.stdout

    solved = kflab("solve", env=scenarios_env)
    assert solved.returncode == 1  # two words: the learner's greeting is kept, count is 2
    (work / "greeting.txt").write_text("hello\n")
    solved = kflab("solve", env=scenarios_env)
    assert solved.returncode == 0 and "complete" in solved.stdout
    progress = json.loads((state / "progress" / "hello-files.json").read_text())
    assert progress["current"] == 2
    assert progress["steps"]["greet"]["hints"] == 2
    assert progress["steps"]["greet"]["attempts"] == 2


def test_solve_keeps_the_learners_file(kflab, state: Path, tmp_path: Path,
                                       scenarios_env) -> None:
    work = tmp_path / "w"
    kflab("scenario", "start", "hello-files", "--workdir", str(work), env=scenarios_env)
    (work / "greeting.txt").write_text("my own words\n")
    assert kflab("solve", env=scenarios_env).returncode == 0
    assert (work / "greeting.txt.orig").read_text() == "my own words\n"
    assert (work / "greeting.txt").read_text() == "hello\n"


def test_test_mode_enforces_the_invariant(state: Path, scenarios_env) -> None:
    scenario = loader.find("hello-files")
    result = run_scenario(scenario, state, mode="test")
    assert result.ok, result.to_dict()
    assert all(c.ok is False for s in result.steps for c in s.before or [])


def test_a_check_that_passes_before_the_solution_is_reported(state: Path, tmp_path: Path,
                                                             scenarios_env) -> None:
    import shutil

    broken = tmp_path / "hello-files"
    shutil.copytree(DATA / "hello-files", broken)
    # Ship the solution as a starting asset: the first step's check can no longer fail.
    shutil.copy(broken / "solutions" / "greeting.txt", broken / "assets" / "greeting.txt")
    result = run_scenario(loader.load_scenario(broken), state, mode="test")
    assert not result.ok
    assert result.steps[0].status == "failed"
    assert "pass before the solution" in (result.steps[0].error or "")


def test_reports_json_and_junit(state: Path, tmp_path: Path, scenarios_env) -> None:
    good = run_scenario(loader.find("hello-files"), state, mode="auto")
    (tmp_path / "bad").mkdir()
    import shutil

    shutil.copytree(DATA / "hello-files", tmp_path / "bad" / "hello-files")
    (tmp_path / "bad" / "hello-files" / "assets" / "count.py").write_text("raise SystemExit(4)\n")
    bad = run_scenario(loader.load_scenario(tmp_path / "bad" / "hello-files"), state)
    report.write_json([good, bad], tmp_path / "r.json")
    report.write_junit([good, bad], tmp_path / "r.xml")
    data = json.loads((tmp_path / "r.json").read_text())
    assert [d["status"] for d in data] == ["passed", "failed"]
    root = ET.parse(tmp_path / "r.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("errors") for s in suites] == ["0", "1"]
    err = suites[1].find("testcase[@name='count']/error")
    assert err is not None and "exited with 4" in err.get("message", "")


def test_the_folder_says_which_lab_answers(kflab, state: Path, tmp_path: Path) -> None:
    """Two labs started, one after the other: `kflab check` in the first one's folder checks
    the first (as git finds its repository from the folder), anywhere else the one started
    last, named with its folder; starting the second says the first stays in progress."""
    import shutil

    labs = tmp_path / "labs"  # hello-files, and a copy of it under another id
    shutil.copytree(DATA / "hello-files", labs / "hello-files")
    shutil.copytree(DATA / "hello-files", labs / "hello-again")
    spec = labs / "hello-again" / "scenario.yaml"
    spec.write_text(spec.read_text().replace("id: hello-files", "id: hello-again", 1))
    scenarios_env = {"KFLAB_SCENARIOS": str(labs)}
    first, second = tmp_path / "first", tmp_path / "second"
    kflab("scenario", "start", "hello-files", "--workdir", str(first), env=scenarios_env)
    other = kflab("scenario", "start", "hello-again", "--workdir", str(second), env=scenarios_env)
    assert other.returncode == 0, other.stdout + other.stderr
    assert "hello-files stays in progress" in " ".join(other.stdout.split()), other.stdout

    here = kflab("check", "--wait", "0", cwd=first, env=scenarios_env)
    assert "greeting.txt must contain 'hello'" in here.stdout, here.stdout
    assert "started last" not in here.stdout
    (first / "greeting.txt").write_text("hello\n")
    assert kflab("check", cwd=first, env=scenarios_env).returncode == 0
    progress = json.loads((state / "progress" / "hello-files.json").read_text())
    assert progress["current"] == 1  # the first lab moved on, from its own folder

    elsewhere = kflab("check", "--wait", "0", cwd=tmp_path, env=scenarios_env)
    text = " ".join(elsewhere.stdout.split())
    assert f"(lab hello-again, the one started last; its files are in {second})" in text, text
    again = json.loads((state / "progress" / "hello-again.json").read_text())
    assert again["steps"]["greet"]["attempts"] == 1  # this check was the second lab's


def test_a_solution_that_runs_a_broken_learner_file_says_how_to_get_it_back(
        kflab, state: Path, tmp_path: Path) -> None:
    """pipeline-classifiers' step 1 is solved by running the learner's own pipeline.py: with
    a syntax error in it, `kflab solve` fails -- and says which file differs from the lab's
    starting files and the command that takes the starting copy back; that command works."""
    import shlex

    work = tmp_path / "pc"
    assert kflab("scenario", "start", "pipeline-classifiers", "--workdir",
                 str(work)).returncode == 0
    (work / "pipeline.py").write_text((work / "pipeline.py").read_text() + "\nsyntax error (\n")
    solve = kflab("solve", cwd=work)
    text = " ".join((solve.stdout + solve.stderr).split())
    assert solve.returncode == 2, text
    assert "pipeline.py" in text and "differ(s) from the lab's starting files" in text, text
    cp = text.split("cp ", 1)[1].split()[:2]
    assert Path(cp[1]) == work / "pipeline.py", cp
    Path(shlex.split(" ".join(cp))[1]).write_bytes(Path(shlex.split(" ".join(cp))[0])
                                                   .read_bytes())
    again = kflab("solve", cwd=work)
    assert again.returncode == 0 and "passed" in again.stdout, again.stdout + again.stderr


def test_piped_status_keeps_each_step_on_one_line(kflab, state: Path, tmp_path: Path,
                                                  scenarios_env) -> None:
    """`kflab scenario status | grep ...`: piped, a step's row is one line however narrow
    the terminal the pipe started from (a newcomer saw a row split in two at 80 columns)."""
    kflab("scenario", "start", "hello-files", "--workdir", str(tmp_path / "w"),
          env=scenarios_env)
    out = kflab("scenario", "status", env={**scenarios_env, "COLUMNS": "30"}).stdout
    titles = [step.title for step in loader.load_scenario(DATA / "hello-files").steps]
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "STEP"])
    assert lines[header].split() == ["#", "STEP", "STATUS", "CHECKED", "HINTS"], out
    rows = lines[header + 1:header + 1 + len(titles)]
    assert lines[header + 1 + len(titles)].startswith("Now: step 1"), out
    for n, (row, title) in enumerate(zip(rows, titles, strict=True), 1):
        assert row.startswith(str(n)) and title in row, out
