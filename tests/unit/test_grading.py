"""Grading real hand-ins: three students drive the guided flow through the CLI (one completes
it with the real steps, one stops half-way, one uses `kflab solve`), export their work, and
the instructor grades the three folders and collects the class."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab.errors import LabError
from lab.scenarios import actions, export, grading, handin, loader
from tests.conftest import run_kflab

DATA = Path(__file__).resolve().parents[1] / "data"
Kflab = Callable[..., Any]


def untar(tar: tarfile.TarFile, into: Path) -> None:
    """Extract an archive this test made; tarfile's `filter=` is missing before 3.11.4."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
    else:  # Debian 12's python3 3.11.2: the archive is the test's own
        tar.extractall(into)


SCENARIOS = {"KFLAB_SCENARIOS": str(DATA / "scenarios")}


@pytest.fixture
def scenarios_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("KFLAB_SCENARIOS", SCENARIOS["KFLAB_SCENARIOS"])
    return SCENARIOS


def student(home: Path) -> Callable[..., Any]:
    """The CLI as one student runs it: their own state folder, from their home folder."""
    home.mkdir(parents=True, exist_ok=True)

    def run(*args: str, ok: bool | None = True) -> Any:
        out = run_kflab(*args, cwd=home, env={**SCENARIOS, "KFLAB_STATE": str(home / "state")})
        if ok is not None:
            assert (out.returncode == 0) == ok, (args, out.stdout, out.stderr)
        return out
    return run


@pytest.fixture(scope="module")
def made_handins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three hand-ins of hello-files made through the real guided flow (once per module)."""
    base = tmp_path_factory.mktemp("students")
    # Ada: both steps by hand, one wrong attempt first.
    ada = student(base / "ada")
    ada("scenario", "start", "hello-files", "--workdir", "work")
    ada("check", "--wait", "0", ok=False)
    (base / "ada" / "work" / "greeting.txt").write_text("hello\n")
    ada("check")
    subprocess.run([sys.executable, "count.py"], cwd=base / "ada" / "work", check=True)
    ada("check")
    ada("progress", "export", "--student", "Ada Lovelace", "--out", "ada.tar.gz")
    # Bob: the first step after two hints; the second never done.
    bob = student(base / "bob")
    bob("scenario", "start", "hello-files", "--workdir", "work")
    bob("hint")
    bob("hint")
    (base / "bob" / "work" / "greeting.txt").write_text("hello world\n")
    bob("check")
    bob("check", "--wait", "0", ok=False)
    bob("progress", "export", "--student", "Bob", "--out", "bob-handin")
    # Cy: `kflab solve` on both steps, then a restart and both steps again by hand (the
    # restart empties progress/<id>.json; the journal still knows about the solves).
    cy = student(base / "cy")
    cy("scenario", "start", "hello-files", "--workdir", "work")
    cy("solve")
    cy("solve")
    cy("scenario", "start", "hello-files", "--workdir", "work", "--restart")
    # --restart moved the solved files aside: the first step is done again by hand.
    (base / "cy" / "work" / "greeting.txt").write_text("hello\n")
    cy("check")
    subprocess.run([sys.executable, "count.py"], cwd=base / "cy" / "work", check=True)
    cy("check")
    cy("progress", "export", "--student", "=Cy", "--out", "cy.tgz")
    # The students' own folders are gone: grading must read the hand-ins only.
    for name in ("ada", "bob", "cy"):
        shutil.rmtree(base / name / "state")
        shutil.rmtree(base / name / "work")
    return base


@pytest.fixture
def handins(made_handins: Path, tmp_path: Path) -> dict[str, Path]:
    """A private copy of the three hand-ins (tests may change them)."""
    shutil.copytree(made_handins, tmp_path / "students")
    base = tmp_path / "students"
    return {"ada": base / "ada" / "ada.tar.gz", "bob": base / "bob" / "bob-handin",
            "cy": base / "cy" / "cy.tgz"}


def test_three_students_graded_and_collected(kflab: Kflab, tmp_path: Path, handins,
                                             scenarios_env) -> None:
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    env = {**scenarios_env, "KFLAB_STATE": str(teacher / "state")}
    for name in ("ada", "bob", "cy"):
        out = kflab("scenario", "grade", "hello-files", "--work", str(handins[name]),
                    cwd=teacher, env=env)
        assert out.returncode == 0, out.stderr
    grades = teacher / "grades"
    ada = json.loads((grades / "Ada-Lovelace" / "hello-files" / "grade.json").read_text())
    bob = json.loads((grades / "Bob" / "hello-files" / "grade.json").read_text())
    cy = json.loads((grades / "Cy" / "hello-files" / "grade.json").read_text())

    assert ada["summary"] == {"steps_total": 2, "steps_passed": 2, "steps_skipped": 0,
                              "status": "complete",
                              "attempts": 3, "hints": 0, "solved_by_solve": [],
                              "time_spent_s": ada["summary"]["time_spent_s"], "signals": 1}
    # hello-files states 1m; the students finish in seconds: said, as a signal only
    assert len(ada["signals"]) == 1 and "of the 1m the lab states" in ada["signals"][0]
    assert [(s["id"], s["status"], s["attempts"], s["solved_by_solve"])
            for s in ada["steps"]] == [("greet", "passed", 2, False), ("count", "passed", 1, False)]
    assert ada["summary"]["time_spent_s"] >= 0 and ada["started_at"] <= ada["last_activity"]

    assert bob["summary"]["status"] == "partial"
    assert [(s["id"], s["status"], s["hints"]) for s in bob["steps"]] == \
        [("greet", "passed", 2), ("count", "failed", 0)]
    count_checks = bob["result"]["steps"][1]["checks"]
    assert count_checks[0]["ok"] is False
    assert count_checks[0]["message"] == "count.txt must hold the number of words in greeting.txt"
    # A passing check carries no failure text.
    assert bob["result"]["steps"][0]["checks"][0]["message"] is None

    assert cy["student"] == "=Cy"
    assert cy["summary"]["solved_by_solve"] == ["greet", "count"]
    assert cy["summary"]["status"] == "complete+solve"
    assert [s["status"] for s in cy["steps"]] == ["passed", "passed"]

    junit = ET.parse(grades / "Bob" / "hello-files" / "grade.xml").getroot()
    suite = junit.find("testsuite")
    assert suite is not None and suite.get("name") == "Bob: hello-files"
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase[@name='count']/failure")
    assert failure is not None and "count.txt must hold" in failure.get("message", "")
    props = {p.get("name"): p.get("value")
             for p in suite.findall("testcase[@name='greet']/properties/property")}
    assert props["hints"] == "2" and props["solved_by_solve"] == "False"
    ada_junit = ET.parse(grades / "Ada-Lovelace" / "hello-files" / "grade.xml").getroot()
    assert ["of the 1m the lab states" in (p.get("value") or "") for p in ada_junit.findall(
        "testsuite/properties/property[@name='signal']")] == [True]
    assert "Integrity signals" in (grades / "Ada-Lovelace" / "hello-files" /
                                   "report.html").read_text()
    cy_junit = ET.parse(grades / "Cy" / "hello-files" / "grade.xml").getroot()
    assert [p.get("value") for p in cy_junit.findall(
        "testsuite/testcase/properties/property[@name='solved_by_solve']")] == ["True", "True"]

    row = next(csv.DictReader(io.StringIO(
        (grades / "Bob" / "hello-files" / "grade.csv").read_text())))
    assert (row["student"], row["steps_passed"], row["steps_total"], row["attempts"],
            row["hints"], row["step:greet"], row["step:count"]) == \
        ("Bob", "1", "2", "2", "2", "passed", "failed")

    out = kflab("grade", "collect", "grades", "--csv", "class.csv", "--html", "class.html",
                cwd=teacher, env=env)
    assert out.returncode == 0, out.stderr
    assert "integrity signals (signals, not proof" in out.stdout
    rows = list(csv.DictReader(io.StringIO((teacher / "class.csv").read_text())))
    assert "of the 1m the lab states" in rows[1]["signals"]
    assert [(r["student"], r["status"], r["solved_by_solve"], r["step:count"]) for r in rows] == [
        ("'=Cy", "complete+solve", "greet count", "passed+solve"),  # no spreadsheet formula
        ("Ada Lovelace", "complete", "", "passed"),
        ("Bob", "partial", "", "failed")]
    page = (teacher / "class.html").read_text()
    assert "Ada Lovelace" in page and "count.txt must hold" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page

    # One student's page again from the grade folder, and the last grade by scenario name.
    out = kflab("report", "grades/Bob/hello-files", "-o", "bob.html", cwd=teacher, env=env)
    assert out.returncode == 0, out.stderr
    assert "count.txt must hold" in (teacher / "bob.html").read_text()
    out = kflab("report", "hello-files", "-o", "last.html", cwd=teacher, env=env)
    assert out.returncode == 0, out.stderr
    assert "=Cy: hello-files" in (teacher / "last.html").read_text()  # graded last


def test_grading_never_runs_a_solution(handins, state: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, scenarios_env) -> None:
    def refuse(*_: Any) -> str:
        raise AssertionError("a solve action ran during grading")

    for verb, kind in list(actions.ACTION_TYPES.items()):
        monkeypatch.setitem(actions.ACTION_TYPES, verb, actions.ActionType(kind.validate, refuse))
    result = grading.grade(loader.find("hello-files"), handins["bob"], state)
    assert [s.status for s in result.steps] == ["passed", "failed"]
    # The sandbox holds Bob's files only: no count.txt appeared, greeting.txt is his.
    work = Path(result.result.workdir)
    assert not (work / "count.txt").exists()
    assert (work / "greeting.txt").read_text() == "hello world\n"


def test_a_changed_step_and_the_record_of_a_restart(handins, state: Path, tmp_path: Path,
                                                    scenarios_env) -> None:
    """Ada's greeting edited after the step passed: her session says passed, the work does
    not: the step is `changed`, not silently passed or failed."""
    folder = tmp_path / "ada-x"
    with tarfile.open(handins["ada"]) as tar:
        untar(tar, folder)
    root = folder / "Ada-Lovelace"
    (root / "work" / "hello-files" / "greeting.txt").write_text("bye\n")
    result = grading.grade(loader.find("hello-files"), root, state)
    assert [s.status for s in result.steps] == ["changed", "passed"]
    assert result.steps[0].passed_in_session
    assert result.status == "partial"  # edited after it passed: not explained, not counted


def test_a_cleaned_up_step_reads_passed_in_every_grade_file(handins, state: Path,
                                                            tmp_path: Path,
                                                            scenarios_env) -> None:
    """A step verified in the session whose resource is gone now, of a kind the lab tells
    learners to delete (`cleanup: [InferenceService]`): `passed (cleaned up)` in grade.json,
    the CSV and JUnit (no failure there). hello-files has no resource, so a scenario that
    checks one is made here from it."""
    from lab.scenarios import gradebook

    scenario = loader.find("hello-files")
    step = scenario.steps[1]
    gone = dataclasses.replace(step.checks[0], type="condition", params={
        "kind": "InferenceService", "name": "iris", "condition": "Ready"})
    scenario = dataclasses.replace(scenario, cleanup=("InferenceService",), steps=(
        scenario.steps[0], dataclasses.replace(step, checks=(gone,))))
    result = grading.grade(scenario, handins["ada"], state)
    assert [s.label for s in result.steps] == ["passed", "passed (cleaned up)"]
    assert result.status == "complete"
    files = gradebook.write(result, tmp_path / "g")
    row = next(csv.DictReader(io.StringIO(files["csv"].read_text())))
    assert row["step:count"] == "passed (cleaned up)"
    suite = ET.parse(files["junit"]).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert suite.find("testcase[@name='count']/failure") is None
    out = suite.find("testcase[@name='count']/system-out")
    assert out is not None and "cleaned up since" in (out.text or "")
    assert "passed (cleaned up)" in files["html"].read_text()


@pytest.mark.parametrize(("kind", "cleanup"), [("PyTorchJob", ()), ("PipelineRun", ()),
                                               ("Experiment", ()),
                                               ("InferenceService", ())])
def test_a_missing_run_is_failed_never_cleaned_up(handins, state: Path, scenarios_env,
                                                  kind: str, cleanup: tuple[str, ...]) -> None:
    """Issue 34: "passed (cleaned up)" was granted to any step whose resource was absent. A
    missing PipelineRun, Experiment or job (no lab asks to delete one), or a server of a kind
    the lab does not declare in `cleanup:`, grades failed, saying what is missing."""
    scenario = loader.find("hello-files")
    step = scenario.steps[1]
    check = (dataclasses.replace(step.checks[0], type="pipeline-run",
                                 params={"name": "gone", "state": "SUCCEEDED"})
             if kind == "PipelineRun" else
             dataclasses.replace(step.checks[0], type="condition", params={
                 "kind": kind, "name": "gone", "condition": "Succeeded"}))
    scenario = dataclasses.replace(scenario, cleanup=cleanup, steps=(
        scenario.steps[0], dataclasses.replace(step, checks=(check,))))
    result = grading.grade(scenario, handins["ada"], state)
    assert [s.label for s in result.steps] == [
        "passed", f"failed (no {kind} 'gone' in the hand-in)"]
    assert result.status == "partial"


def test_a_work_folder_with_its_state_inside(kflab: Kflab, tmp_path: Path, state: Path,
                                            scenarios_env) -> None:
    """No export: the student worked with KFLAB_STATE=./.kflab inside the work folder."""
    home = tmp_path / "dee"
    home.mkdir()
    env = {**scenarios_env, "KFLAB_STATE": str(home / ".kflab")}
    assert kflab("scenario", "start", "hello-files", "--workdir", ".", cwd=home,
                 env=env).returncode == 0
    (home / "greeting.txt").write_text("hello\n")
    assert kflab("check", cwd=home, env=env).returncode == 0
    result = grading.grade(loader.find("hello-files"), home, state)
    assert result.student == "dee"
    assert [s.status for s in result.steps] == ["passed", "failed"]
    assert not (Path(result.result.workdir) / ".kflab").exists()


def test_bad_hand_ins_are_clear_errors(tmp_path: Path, state: Path, scenarios_env) -> None:
    hello = loader.find("hello-files")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LabError, match="no kflab progress for 'hello-files'"):
        grading.grade(hello, empty, state)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / handin.MANIFEST).write_text('{"kind": "kflab-export", "format": 99}')
    with pytest.raises(LabError, match="field 'format'"):
        grading.grade(hello, bad, state)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(LabError, match="neither a folder nor"):
        grading.grade(hello, tmp_path / "notes.txt", state)
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(LabError, match="unsafe member"):
        grading.grade(hello, evil, state)
    assert not (tmp_path / "escape.txt").exists() and not (state.parent / "escape.txt").exists()


def test_work_done_on_a_cluster_is_not_graded_from_a_hand_in(handins, state: Path,
                                                             scenarios_env) -> None:
    record = handins["bob"] / "state" / "progress" / "hello-files.json"
    progress = json.loads(record.read_text())
    progress["backend"] = {"name": "cluster", "context": "lab"}
    record.write_text(json.dumps(progress))
    with pytest.raises(LabError, match="on the cluster backend: that work lives in the cluster"):
        grading.grade(loader.find("hello-files"), handins["bob"], state)


def test_links_in_a_hand_in_are_left_out(handins, state: Path, tmp_path: Path,
                                         scenarios_env) -> None:
    """A hand-in cannot make a check read the instructor's files through a link."""
    secret = tmp_path / "instructor-secret.txt"
    secret.write_text("hello from the instructor\n")
    root = handins["bob"]
    greeting = root / "work" / "hello-files" / "greeting.txt"
    greeting.unlink()
    greeting.symlink_to(secret)
    result = grading.grade(loader.find("hello-files"), root, state)
    assert result.steps[0].status == "changed"  # no greeting.txt in the sandbox
    assert any("greeting.txt (a link)" in n for n in result.notes)


def test_export_refuses_bad_names_and_an_existing_target(tmp_path: Path, state: Path) -> None:
    with pytest.raises(LabError, match="not a usable student name"):
        handin.student_name("a\x1b[31mb")
    with pytest.raises(LabError, match="no scenario progress"):
        export.export(state, [], "Ada", tmp_path / "out")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    (state / "progress").mkdir()
    (state / "progress" / "x.json").write_text(json.dumps({"workdir": str(tmp_path)}))
    with pytest.raises(LabError, match="already exists"):
        export.export(state, ["x"], "Ada", tmp_path / "taken")


def test_export_from_inside_the_work_folder(kflab: Kflab, tmp_path: Path,
                                            scenarios_env) -> None:
    """`kflab progress export --out x.tar.gz` run in the work folder, twice, with the state
    kept there too: the export never contains itself, an earlier export or the state."""
    work = tmp_path / "w"
    work.mkdir()
    env = {**scenarios_env, "KFLAB_STATE": str(work / "mystate")}
    assert kflab("scenario", "start", "hello-files", "--workdir", ".", cwd=work,
                 env=env).returncode == 0
    for name in ("first.tar.gz", "again", "third.tgz"):
        out = kflab("progress", "export", "--student", "Di", "--out", name, cwd=work, env=env)
        assert out.returncode == 0, out.stderr
    with tarfile.open(work / "third.tgz") as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert names == ["Di/kflab-export.json", "Di/state/progress/hello-files.events.jsonl",
                     "Di/state/progress/hello-files.json", "Di/work/hello-files/count.py"]


def test_rebase_moves_only_whole_path_prefixes(tmp_path: Path) -> None:
    rec = tmp_path / "resources" / "pipelineruns" / "default" / "r.json"
    rec.parent.mkdir(parents=True)
    rec.write_text(json.dumps({"a": "/home/s/lab/x", "b": "/home/s/lab2/x",
                               "c": "file:///home/s/lab/m", "d": ["/home/s/lab"],
                               "e": "/var/home/s/lab/x", "f": "/home/s/lab/a.png,/home/s/lab/b"}))
    assert handin.rebase(tmp_path, {"/home/s/lab": "/sb/work"}) == 1
    assert json.loads(rec.read_text()) == {
        "a": "/sb/work/x", "b": "/home/s/lab2/x", "c": "file:///sb/work/m", "d": ["/sb/work"],
        "e": "/var/home/s/lab/x", "f": "/sb/work/a.png,/sb/work/b"}


STATE_RUN = """\
id: state-run
title: A pipeline run read back from the state
level: beginner
duration: 1m
requires: [pipelines]
steps:
  - id: run
    title: Run the tiny pipeline as first-run
    text: steps/run.md
    solve:
      - pipeline: {file: tiny.py, name: first-run}
    checks:
      - type: pipeline-run
        name: first-run
        artifact: {task: train, name: model}
        message: run tiny.py with --name first-run
      - type: command
        argv: [kflab, get, run, first-run]
        message: kflab get run first-run finds no run
"""


def test_checks_read_the_students_state_not_the_instructors(kflab: Kflab, tmp_path: Path,
                                                           monkeypatch) -> None:
    """A real pipeline run: Ada ran it, Eve did not. Grading Eve from Ada's own state folder
    (the instructor's state holding a successful first-run) must still fail her; grading Ada
    after her machine is gone reads the artifact from the copy of her records."""
    folder = tmp_path / "scenarios" / "state-run"
    (folder / "steps").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "scenario.yaml").write_text(STATE_RUN)
    (folder / "steps" / "run.md").write_text("# Run\n")
    shutil.copy(DATA / "pipelines" / "tiny.py", folder / "assets" / "tiny.py")
    env = {"KFLAB_SCENARIOS": str(folder.parent)}
    monkeypatch.setenv("KFLAB_SCENARIOS", env["KFLAB_SCENARIOS"])

    def as_(name: str, *args: str) -> Any:
        home = tmp_path / name
        home.mkdir(exist_ok=True)
        out = kflab(*args, cwd=home, env={**env, "KFLAB_STATE": str(home / "state")})
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out

    as_("ada", "scenario", "start", "state-run", "--workdir", "work")
    out = kflab("pipeline", "run", "tiny.py", "--name", "first-run", cwd=tmp_path / "ada" / "work",
                env={**env, "KFLAB_STATE": str(tmp_path / "ada" / "state")})
    assert out.returncode == 0, out.stdout + out.stderr
    as_("ada", "check")
    as_("ada", "progress", "export", "--student", "Ada", "--out", "ada.tar.gz")
    as_("eve", "scenario", "start", "state-run", "--workdir", "work")
    as_("eve", "progress", "export", "--student", "Eve", "--out", "eve.tar.gz")
    # Fay ran `kflab solve`, then erased it from her progress and journal: the owner record
    # of the run it made still names the command.
    as_("fay", "scenario", "start", "state-run", "--workdir", "work")
    as_("fay", "solve")
    progress_file = tmp_path / "fay" / "state" / "progress" / "state-run.json"
    progress = json.loads(progress_file.read_text())
    progress["steps"]["run"]["solved"] = False
    progress_file.write_text(json.dumps(progress))
    events = progress_file.with_name("state-run.events.jsonl")
    events.write_text("".join(x for x in events.read_text().splitlines(keepends=True)
                              if '"solve"' not in x))
    as_("fay", "progress", "export", "--student", "Fay", "--out", "fay.tar.gz")

    scenario = loader.find("state-run")
    eve = grading.grade(scenario, tmp_path / "eve" / "eve.tar.gz", tmp_path / "ada" / "state")
    assert [c.ok for c in eve.result.steps[0].checks] == [False, False]
    fay = grading.grade(scenario, tmp_path / "fay" / "fay.tar.gz", tmp_path / "teacher")
    assert fay.status == "complete+solve" and fay.steps[0].solved_by_solve
    assert any("the owner record of pipelineruns/default/first-run says it was made by "
               "`kflab solve` although progress and journal record no solve" in x
               for x in fay.signals), fay.signals

    shutil.rmtree(tmp_path / "ada" / "state")
    shutil.rmtree(tmp_path / "ada" / "work")
    # The instructor's shell points at a cluster: the checks still read Ada's local records.
    monkeypatch.setenv("KFLAB_CONTEXT", "the-instructors-cluster")
    monkeypatch.setenv("KFLAB_BACKEND", "cluster")
    ada = grading.grade(scenario, tmp_path / "ada" / "ada.tar.gz", tmp_path / "teacher")
    assert [c.ok for c in ada.result.steps[0].checks] == [True, True], ada.result.steps[0]


def test_exporting_one_lab_carries_only_its_records(kflab: Kflab, tmp_path: Path,
                                                    monkeypatch) -> None:
    """Gus did state-run (a pipeline run named first-run, read by its check) and, from another
    folder, an unrelated run: the hand-in of state-run carries first-run only; the hand-in of
    hello-files carries no run at all; exporting everything carries both."""
    folder = tmp_path / "scenarios" / "state-run"
    (folder / "steps").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "scenario.yaml").write_text(STATE_RUN)
    (folder / "steps" / "run.md").write_text("# Run\n")
    shutil.copy(DATA / "pipelines" / "tiny.py", folder / "assets" / "tiny.py")
    shutil.copytree(DATA / "scenarios" / "hello-files", tmp_path / "scenarios" / "hello-files")
    env = {"KFLAB_SCENARIOS": str(tmp_path / "scenarios"), "KFLAB_STATE": str(tmp_path / "st")}
    monkeypatch.setenv("KFLAB_SCENARIOS", env["KFLAB_SCENARIOS"])
    home = tmp_path / "gus"
    (home / "elsewhere").mkdir(parents=True)

    def run(*args: str, cwd: Path = home) -> None:
        out = kflab(*args, cwd=cwd, env=env)
        assert out.returncode == 0, (args, out.stdout, out.stderr)

    run("scenario", "start", "hello-files", "--workdir", "hello")
    run("scenario", "start", "state-run", "--workdir", "work")
    run("solve")
    run("pipeline", "run", str(DATA / "pipelines" / "tiny.py"), "--name", "other-run",
        cwd=home / "elsewhere")

    def runs_in(name: str, *sids: str) -> list[str]:
        run("progress", "export", *sids, "--student", "Gus", "--out", name)
        return sorted(p.stem for p in (home / name / "state" / "resources").rglob("*.json"))

    assert runs_in("one", "state-run") == ["first-run"]
    assert runs_in("two", "hello-files") == []
    assert runs_in("all") == ["first-run", "other-run"]
    manifest = json.loads((home / "one" / handin.MANIFEST).read_text())
    assert manifest["records"] == ["pipelineruns/default/first-run"]


def test_collect_and_report_refuse_edited_files(tmp_path: Path, kflab: Kflab) -> None:
    """Grade and result files are read back from disk: a wrong shape is an error naming the
    file and the field (exit 2), never a traceback."""
    bad = tmp_path / "g" / "grade.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"kind": "kflab-grade", "summary": {}, "steps": [],
                               "result": {"steps": [{"checks": "x"}]}}))
    out = kflab("grade", "collect", str(bad), cwd=tmp_path)
    assert out.returncode == 2 and "field 'result.steps[0].checks'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    (tmp_path / "r.json").write_text(json.dumps([{"steps": [1]}]))
    out = kflab("report", str(tmp_path / "r.json"), cwd=tmp_path)
    assert out.returncode == 2 and "field '[0].steps[0]'" in out.stderr, out.stderr
    out = kflab("report", "no-such-scenario", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr


# --- integrity signals: three students who cheat ---------------------------------------------

def _signals(result: Any, needle: str) -> list[str]:
    return [s for s in result.signals if needle in s]


def test_a_student_who_hid_kflab_solve_is_signalled(tmp_path: Path, state: Path,
                                                    scenarios_env) -> None:
    """Gil solved both steps with `kflab solve`, then set "solved": false and deleted the
    solve lines from the journal: the journal no longer chains, and the grade says so."""
    gil = student(tmp_path / "gil")
    gil("scenario", "start", "hello-files", "--workdir", "work")
    gil("solve")  # `kflab solve` checks too, and moves on when the step passes
    gil("solve")
    progress_file = tmp_path / "gil" / "state" / "progress" / "hello-files.json"
    progress = json.loads(progress_file.read_text())
    for rec in progress["steps"].values():
        rec["solved"] = False
    progress_file.write_text(json.dumps(progress))
    journal_file = progress_file.with_name("hello-files.events.jsonl")
    lines = journal_file.read_text().splitlines(keepends=True)
    journal_file.write_text("".join(x for x in lines if '"solve"' not in x))
    gil("progress", "export", "--student", "Gil", "--out", "gil.tar.gz")
    result = grading.grade(loader.find("hello-files"), tmp_path / "gil" / "gil.tar.gz", state)
    assert result.status == "complete"  # the records were edited: nothing marks a solve...
    broken = _signals(result, "the journal no longer chains")
    assert len(broken) == 1 and "entries were removed or edited" in broken[0], result.signals
    # ...but the signal names the first entry after the removed solve line
    assert "entry 2 (check" in broken[0]


def test_a_student_who_copied_the_work_passes_with_zero_attempts(
        handins, tmp_path: Path, state: Path, scenarios_env) -> None:
    """Hal started the lab, copied Ada's finished files into his work folder and handed in
    without ever running `kflab check`: both steps pass, each with 0 attempts, signalled."""
    hal = student(tmp_path / "hal")
    hal("scenario", "start", "hello-files", "--workdir", "work")
    with tarfile.open(handins["ada"]) as tar:
        untar(tar, tmp_path / "ada")
    for name in ("greeting.txt", "count.txt"):
        shutil.copy(tmp_path / "ada" / "Ada-Lovelace" / "work" / "hello-files" / name,
                    tmp_path / "hal" / "work" / name)
    hal("progress", "export", "--student", "Hal", "--out", "hal-handin")
    result = grading.grade(loader.find("hello-files"), tmp_path / "hal" / "hal-handin", state)
    assert [s.status for s in result.steps] == ["passed", "passed"]
    zero = _signals(result, "(0 attempts)")
    assert [z.split("'")[1] for z in zero] == ["greet", "count"], result.signals


def test_identical_hand_ins_are_signalled_when_the_class_is_collected(
        kflab: Kflab, handins, tmp_path: Path, scenarios_env) -> None:
    """Ida handed in a copy of Ada's export under her own name: same run ids, same journal.
    Each grade alone looks fine; `kflab grade collect` names both students. Bob, who may
    well have started in the same second as Ada (the fixture makes both hand-ins at once),
    is not named: a start time to the second is no fingerprint."""
    with tarfile.open(handins["ada"]) as tar:
        untar(tar, tmp_path / "copy")
    root = tmp_path / "copy" / "Ada-Lovelace"
    manifest = json.loads((root / handin.MANIFEST).read_text())
    manifest["student"] = "Ida"
    (root / handin.MANIFEST).write_text(json.dumps(manifest))
    env = {**scenarios_env, "KFLAB_STATE": str(tmp_path / "teacher-state")}
    for work in (str(handins["ada"]), str(root), str(handins["bob"])):
        out = kflab("scenario", "grade", "hello-files", "--work", work, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
    out = kflab("grade", "collect", "grades", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "Ada Lovelace / hello-files: shares" in out.stdout, out.stdout
    assert "Ida / hello-files: shares" in out.stdout
    assert "with Ada Lovelace's hand-in" in out.stdout and "the journal" in out.stdout
    assert "Bob / hello-files: shares" not in out.stdout
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
        (tmp_path / "grades.csv").read_text()))}
    assert "shares the journal with Ada Lovelace's hand-in" in rows["Ida"]["signals"]
    assert "shares" not in rows["Bob"]["signals"]
    assert "Integrity signals" in (tmp_path / "grades.html").read_text()


def test_two_journals_started_in_the_same_second_have_their_own_heads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two learners of a class who start a lab in the same second write the same first
    entry but for its nonce: their journals' heads differ, so `grade collect` never calls
    one a copy of the other. (The clock is fixed here, the one thing replaced.)"""
    from lab.scenarios import grading, journal

    monkeypatch.setattr(journal, "now", lambda: "2026-11-27T09:00:00Z")
    heads = []
    for who in ("ada", "bob"):
        journal.record(tmp_path / who, "x", "start")
        journal.record(tmp_path / who, "x", "check", "s1", ok=True)
        events, _ = journal.read(journal.journal_file(tmp_path / who, "x"))
        assert "nonce" in events[0] and "nonce" not in events[1]
        assert journal.chain_break(events) is None
        heads.append(grading._journal_head(events))
    assert None not in heads and heads[0] != heads[1]
    before = {"t": "2026-11-27T09:00:00Z", "event": "start"}  # chained, from before the nonce
    assert grading._journal_head([{**before, "hash": journal.entry_hash("", before)}]) is None


def test_journal_chain(tmp_path: Path) -> None:
    """Entries chain from the first hashed one; an old journal (no hashes) is not broken;
    an edited entry or a removed one is."""
    from lab.scenarios import journal

    old = [{"t": "2026-01-01T00:00:00Z", "event": "start"}]
    assert journal.chain_break(old) is None
    root = tmp_path / "state"
    path = journal.journal_file(root, "x")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old[0]) + "\n")  # written before the chain existed
    for event in ("check", "hint", "check"):
        journal.record(root, "x", event, "s1")
    events, bad = journal.read(path)
    assert bad == 0 and len(events) == 4 and journal.chain_break(events) is None
    edited = [dict(e) for e in events]
    edited[2]["event"] = "solve"
    assert "entry 3 (solve" in (journal.chain_break(edited) or "")
    assert "entry 3 (check" in (journal.chain_break(events[:2] + events[3:]) or "")


def test_class_grade_rerun_grades_each_students_hand_in_run_again(
        handins, tmp_path: Path, state: Path, scenarios_env) -> None:
    """`kflab class grade --rerun DIR`: a student whose hand-in is in DIR (named by their
    roster id) is graded by running their files again; one without is graded from the
    namespace read, with a note. The namespace read itself needs a cluster, so the cells
    here carry what it found (every step checked only on the student's files: skipped)."""
    from lab.scenarios.runner import ScenarioResult, StepResult
    from lab.teaching import progress
    from lab.teaching.class_ import Seat

    scenario = loader.find("hello-files")
    folder = tmp_path / "handins"
    folder.mkdir()
    shutil.copy(handins["ada"], folder / "ada.tar.gz")
    cells = []
    for sid in ("ada", "bob"):
        read = ScenarioResult(scenario.id, scenario.title, "class-status", "cluster", "now")
        read.steps = [StepResult(s.id, s.title, skip_reason=progress.NOT_HERE)
                      for s in scenario.steps]
        cells.append(progress.Cell(Seat(sid, sid, "", f"ml-{sid}", ""), scenario, read))
    csv_path, _, n = progress.write_grades(cells, "https://x", tmp_path / "grades",
                                           rerun=folder, state=state)
    assert n == 2
    ada = json.loads((tmp_path / "grades" / "ada" / "hello-files" / "grade.json").read_text())
    bob = json.loads((tmp_path / "grades" / "bob" / "hello-files" / "grade.json").read_text())
    assert ada["mode"] == "rerun" and ada["summary"]["status"] == "complete"
    assert bob["mode"] == "records" and bob["summary"]["status"] == "skipped"
    assert any("--rerun: no hand-in of bob" in note for note in bob["notes"])
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(csv_path.read_text()))}
    assert rows["ada"]["mode"] == "rerun"


def test_grade_collect_rerun_regrades_record_made_grades(
        kflab: Kflab, handins, tmp_path: Path, scenarios_env) -> None:
    """`kflab grade collect --rerun`: Ada's grade made from her records is made again by
    running her files; a grade whose hand-in is gone is one clear error, nothing collected."""
    env = {**scenarios_env, "KFLAB_STATE": str(tmp_path / "teacher")}
    out = kflab("scenario", "grade", "hello-files", "--work", str(handins["ada"]),
                cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    out = kflab("grade", "collect", "grades", "--rerun", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "reran Ada Lovelace / hello-files: complete (2/2)" in out.stdout, out.stdout
    grade_file = tmp_path / "grades" / "Ada-Lovelace" / "hello-files" / "grade.json"
    assert json.loads(grade_file.read_text())["mode"] == "rerun"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert rows[0]["mode"] == "rerun"
    data = json.loads(grade_file.read_text())
    data["mode"] = "records"
    grade_file.write_text(json.dumps(data))
    handins["ada"].unlink()
    (tmp_path / "grades.csv").unlink()
    out = kflab("grade", "collect", "grades", "--rerun", cwd=tmp_path, env=env)
    assert out.returncode == 2 and "is no longer there" in out.stderr, out.stderr
    assert not (tmp_path / "grades.csv").exists()


def test_a_journal_begun_by_an_older_kflab_reads_clean(tmp_path: Path) -> None:
    """A learner who upgrades kflab mid-lab: lines from a kflab before the chain (no hash),
    then lines chained before `n` existed (a nonce, hints numbered with `n`), then this
    kflab's entries. The chain and the anchor of the new entries hold; the unhashed lines
    stay one signal with its innocent reason (that chain did not yet say how many came
    before it, so a line prepended by hand would look the same); a line added among the
    hashed ones is another signal."""
    from lab import hashchain
    from lab.scenarios import journal

    root = tmp_path / "state"
    path = journal.journal_file(root, "x")
    path.parent.mkdir(parents=True)
    old = [{"t": "2026-01-01T00:00:00Z", "event": "start"},
           {"t": "2026-01-01T00:01:00Z", "event": "check", "step": "a", "ok": False}]
    chained: list[dict] = []
    previous = ""
    for e in ({"t": "2026-01-02T00:00:00Z", "event": "resume", "nonce": "00ff"},
              {"t": "2026-01-02T00:01:00Z", "event": "hint", "step": "a", "n": 1},
              {"t": "2026-01-02T00:02:00Z", "event": "hint", "step": "a", "n": 2}):
        e["hash"] = previous = hashchain.entry_hash(previous, e)
        chained.append(e)
    path.write_text("".join(json.dumps(e) + "\n" for e in old + chained))
    journal.record(root, "x", "hint", "a", hint=3)
    journal.record(root, "x", "check", "a", ok=True)
    anchor = hashchain.anchor(root, "x")
    assert anchor is not None
    events, bad = journal.read(path)
    assert bad == 0 and len(events) == 7
    found = journal.problems(events, [("the progress record", anchor)])
    assert found == ["2 journal entries before the chain begins carry no hash (entry 1: start, "
                     "entry 2: check a): written by a kflab from before the chain, or added "
                     "by hand"], found
    forged = [*events[:4], {"t": "2026-01-02T00:01:30Z", "event": "check", "step": "a",
                            "ok": True}, *events[4:]]
    assert len(journal.problems(forged, [("the progress record", anchor)])) == 2
    # a journal begun before the chain, continued by this kflab: `prior` vouches for it
    fresh = tmp_path / "fresh"
    path2 = journal.journal_file(fresh, "y")
    path2.parent.mkdir(parents=True)
    path2.write_text("".join(json.dumps(e) + "\n" for e in old))
    journal.record(fresh, "y", "check", "a", ok=True)
    events, _ = journal.read(path2)
    assert events[2]["prior"] == 2 and journal.problems(events) == []
    assert journal.problems([events[0], *events]) != []  # one more unhashed line: a signal
