"""Issue 34, Why #1: hand-ins forged by a hostile learner, and what the grade says.

A two-step lab made here (a pipeline run, then a PyTorchJob) is done for real through the
CLI by three learners: Ada by hand, Bob only the first step, Gil with `kflab solve`. Their
exports are then edited the way the review did: progress edited, unhashed journal lines
prepended or inserted, hashes stripped, entries removed and the chain recomputed, owner
records' command lines edited, entries appended after the export, a hand-in copied under
another name with its hashes stripped and its run ids rewritten. Each forgery leaves a
signal, or grades failed; `--rerun` grades only what the handed-in files make.
Nothing is mocked: the runs are real local-backend runs."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab.hashchain import entry_hash
from lab.scenarios import grading, loader
from tests.conftest import run_kflab

REPO = Path(__file__).resolve().parents[2]
SID = "two-runs"

SCENARIO = """\
id: two-runs
title: A pipeline run, then a job (forgery tests)
level: beginner
duration: 30m
steps:
  - id: pipe
    title: Run the pipeline
    text: steps/pipe.md
    solve:
      - pipeline: {file: tiny.py, name: first}
    checks:
      - type: pipeline-run
        name: first
        state: SUCCEEDED
        message: run tiny.py as 'first'
  - id: job
    title: Run the job
    text: steps/job.md
    solve:
      - copy: {from: solutions/job.yaml, to: job.yaml}
      - apply: job.yaml
    checks:
      - type: condition
        kind: PyTorchJob
        name: job
        condition: Succeeded
        timeout: 60
        message: apply job.yaml
"""

# The job a learner writes (the lab ships only a stub); the solution is the same file with
# a comment, long enough that a copy of it is not a coincidence.
JOB = """\
# My first PyTorchJob: one Master replica that prints a line and ends (the lab asks for no
# Workers). restartPolicy Never, so a failure shows at once instead of being retried.
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: job
  labels: {lab: two-runs, owner: me}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: pytorch
              image: python:3.11
              command: [python3, -c, "print('trained')"]
"""
SOLUTION = "# the reference solution of step 'job' (kflab solve copies it)\n" + JOB


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scenarios")
    folder = root / SID
    (folder / "steps").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "solutions").mkdir()
    (folder / "scenario.yaml").write_text(SCENARIO)
    for step in ("pipe", "job"):
        (folder / "steps" / f"{step}.md").write_text(f"Do {step}.\n")
    shutil.copy(REPO / "tests" / "data" / "pipelines" / "tiny.py", folder / "assets")
    (folder / "assets" / "job.yaml").write_text("# write the PyTorchJob here\n")
    (folder / "solutions" / "job.yaml").write_text(SOLUTION)
    return root


def learner(home: Path, lab: Path) -> Callable[..., Any]:
    home.mkdir(parents=True, exist_ok=True)

    def run(*args: str, cwd: Path | None = None) -> Any:
        out = run_kflab(*args, cwd=cwd or home,
                        env={"KFLAB_SCENARIOS": str(lab), "KFLAB_STATE": str(home / "state")})
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out
    return run


@pytest.fixture(scope="module")
def made(lab: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ada (both steps by hand), Bob (the first only), Gil (`kflab solve` on both)."""
    base = tmp_path_factory.mktemp("learners")
    ada = learner(base / "ada", lab)
    ada("scenario", "start", SID, "--workdir", "work")
    work = base / "ada" / "work"
    ada("pipeline", "run", "tiny.py", "--name", "first", cwd=work)
    ada("check", "--wait", "30")
    (work / "job.yaml").write_text(JOB)
    ada("apply", "-f", "job.yaml", cwd=work)
    ada("check", "--wait", "60")
    ada("progress", "export", "--student", "Ada", "--out", "hand")
    bob = learner(base / "bob", lab)
    bob("scenario", "start", SID, "--workdir", "work")
    bob("pipeline", "run", "tiny.py", "--name", "first", cwd=base / "bob" / "work")
    bob("check", "--wait", "30")
    bob("progress", "export", "--student", "Bob", "--out", "hand")
    gil = learner(base / "gil", lab)
    gil("scenario", "start", SID, "--workdir", "work")
    gil("solve")
    gil("solve")
    gil("progress", "export", "--student", "Gil", "--out", "hand")
    return base


@pytest.fixture
def hand(made: Path, tmp_path: Path, lab: Path,
         monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """A private copy of one learner's hand-in folder (a test edits it)."""
    monkeypatch.setenv("KFLAB_SCENARIOS", str(lab))

    def get(who: str) -> Path:
        dest = tmp_path / who
        if not dest.exists():
            shutil.copytree(made / who / "hand", dest)
        return dest
    return get


def grade(folder: Path, state: Path, **kw: Any) -> Any:
    return grading.grade(loader.find(SID), folder, state, **kw)


def journal_path(folder: Path) -> Path:
    return folder / "state" / "progress" / f"{SID}.events.jsonl"


def entries(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in journal_path(folder).read_text().splitlines() if x.strip()]


def write_entries(folder: Path, items: list[dict[str, Any]]) -> None:
    journal_path(folder).write_text("".join(json.dumps(e, sort_keys=True) + "\n"
                                            for e in items))


def rechain(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a forger who read lab/hashchain.py does: renumber and recompute every hash."""
    previous, out = "", []
    for n, e in enumerate(items, 1):
        e = {k: v for k, v in e.items() if k != "hash"}
        e["n"] = n
        e["hash"] = previous = entry_hash(previous, e)
        out.append(e)
    return out


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def signals(result: Any, needle: str) -> list[str]:
    return [s for s in result.signals if needle in s]


def test_honest_hand_ins_have_no_journal_signal(hand: Callable[[str], Path],
                                                state: Path) -> None:
    """The baseline: Ada's and Bob's real hand-ins chain, every anchor holds (a lab done by
    a test in seconds is "finished fast": that signal is not about the records)."""
    ada = grade(hand("ada"), state)
    assert [s.label for s in ada.steps] == ["passed", "passed"], ada.result
    assert [s for s in ada.signals if not s.startswith("finished in")] == [], ada.signals
    bob = grade(hand("bob"), state)
    assert [s.status for s in bob.steps] == ["passed", "failed"]
    assert bob.signals == [], bob.signals


def test_why_1_edited_progress_and_a_prepended_unhashed_line(hand: Callable[[str], Path],
                                                             state: Path) -> None:
    """The review's forgery: Bob sets step 'job' passed in progress and puts one unhashed
    passing check before the journal's first hashed line. Before: "passed (cleaned up)",
    complete, no signal. Now the missing PyTorchJob grades failed, and both edits show."""
    folder = hand("bob")
    edit_json(folder / "state" / "progress" / f"{SID}.json", lambda d: d["steps"].update(
        job={"attempts": 1, "hints": 0, "solved": False, "passed_at": "2026-01-01T10:00:00Z"}))
    forged = {"event": "check", "ok": True, "step": "job", "t": "2026-01-01T10:00:00Z"}
    write_entries(folder, [forged, *entries(folder)])
    result = grade(folder, state)
    assert [s.label for s in result.steps] == [
        "passed", "failed (no PyTorchJob 'job' in the hand-in)"]
    assert result.status == "partial"
    assert signals(result, "before the chain begins carries no hash (entry 1: check job)")
    assert signals(result, "progress says step 'job' passed at 2026-01-01T10:00:00Z, but the "
                           "journal holds no passing check of it")


def test_an_unhashed_line_among_hashed_ones(hand: Callable[[str], Path], state: Path) -> None:
    folder = hand("bob")
    items = entries(folder)
    forged = {"event": "hint", "step": "job", "t": items[-1]["t"]}
    write_entries(folder, [*items[:-1], forged, items[-1]])
    result = grade(folder, state)
    assert signals(result, "among the hashed ones carries no hash (entry "), result.signals


def test_a_journal_with_every_hash_removed(hand: Callable[[str], Path], state: Path) -> None:
    """Gil strips every hash (which also hid a removed solve line before): the progress
    record and the owner records show a hashing kflab wrote it."""
    folder = hand("gil")
    write_entries(folder, [{k: v for k, v in e.items() if k not in ("hash", "n", "nonce",
                                                                    "prior", "kflab")}
                           for e in entries(folder) if e["event"] != "solve"])
    result = grade(folder, state)
    found = signals(result, "carry no hash although")
    assert found and "shows it was written by a kflab that hashes" in found[0], result.signals


def test_hashes_and_every_anchor_removed(hand: Callable[[str], Path], state: Path) -> None:
    """Everything that names the chain removed too: a journal without hashes is still a
    signal (it cannot be checked), never read as trustworthy."""
    folder = hand("gil")
    write_entries(folder, [{k: v for k, v in e.items() if k not in ("hash", "n", "nonce",
                                                                    "prior", "kflab")}
                           for e in entries(folder)])
    edit_json(folder / "state" / "progress" / f"{SID}.json", lambda d: d.pop("journal"))
    for rec in (folder / "state" / "owners").rglob("*.json"):
        edit_json(rec, lambda d: d.pop("journal", None))
    edit_json(folder / "kflab-export.json", lambda d: d["scenarios"][SID].pop("journal"))
    result = grade(folder, state)
    assert signals(result, "carry no hash (written by a kflab from before the chain, or the "
                           "hashes were removed)"), result.signals


def test_a_removed_solve_line_and_a_rechained_journal(hand: Callable[[str], Path],
                                                     state: Path) -> None:
    """Gil removes his `solve` lines and recomputes every hash: the chain holds, but the
    progress record, the owner records and the export manifest recorded other heads, and
    the owner records' solve marks name entries the journal no longer has."""
    folder = hand("gil")
    edit_json(folder / "state" / "progress" / f"{SID}.json",
              lambda d: [s.update(solved=False) for s in d["steps"].values()])
    write_entries(folder, rechain([e for e in entries(folder) if e["event"] != "solve"]))
    result = grade(folder, state)
    assert not signals(result, "no longer chains"), result.signals
    assert signals(result, "the progress record records journal entry")
    assert signals(result, "the export manifest records journal entry")
    assert signals(result, "the owner record of pipelineruns/default/first records journal")
    assert signals(result, "carries the mark of a `kflab solve` (journal entry")
    assert all(s.solved_by_solve for s in result.steps)  # the marks still say who made them


def test_a_prepended_line_and_a_rechained_journal(hand: Callable[[str], Path],
                                                 state: Path) -> None:
    folder = hand("bob")
    forged = {"event": "check", "ok": True, "step": "job", "t": "2026-01-01T10:00:00Z"}
    write_entries(folder, rechain([forged, *entries(folder)]))
    result = grade(folder, state)
    assert signals(result, "the progress record records journal entry"), result.signals


def test_owner_records_that_disagree_with_the_journal(hand: Callable[[str], Path],
                                                     state: Path) -> None:
    """Gil edits the owner record of his pipeline run: once the command line only (its solve
    mark stays), once the mark only (the command line still says `kflab solve`)."""
    folder = hand("gil")
    owner = folder / "state" / "owners" / "pipelineruns" / "default" / "first.json"
    edit_json(owner, lambda d: d.update(argv=["kflab", "pipeline", "run", "evil.py"]))
    result = grade(folder, state)
    assert signals(result, "carries the mark of `kflab solve`, but its command line reads "
                           "`kflab pipeline run evil.py`"), result.signals
    edit_json(owner, lambda d: (d.pop("solve"), d.update(argv=["kflab", "solve"])))
    result = grade(folder, state)
    assert signals(result, "has lost the mark that kflab gives what `kflab solve` starts")


def test_entries_appended_after_the_export(hand: Callable[[str], Path], state: Path) -> None:
    """Bob exports, then appends a correctly chained passing check of 'job' (computed as
    kflab would): the export manifest recorded the journal's end before it."""
    folder = hand("bob")
    items = entries(folder)
    extra = {"event": "check", "ok": True, "step": "job", "t": items[-1]["t"],
             "n": items[-1]["n"] + 1}
    extra["hash"] = entry_hash(items[-1]["hash"], extra)
    write_entries(folder, [*items, extra])
    result = grade(folder, state)
    assert signals(result, "written after the export"), result.signals


def test_a_copied_hand_in_stripped_and_relabelled_is_found_by_collect(
        hand: Callable[[str], Path], tmp_path: Path, lab: Path) -> None:
    """Ida copies Ada's hand-in, renames it, strips the journal's hashes and nonce, and
    rewrites every run id (uuid) in every file: run ids and journal heads no longer match,
    but the runs' random marks (temporary folder names, owner tokens) and Ada's own job.yaml
    do. Bob, who did the same lab on the same machine, is not named."""
    ada, bob = hand("ada"), hand("bob")
    ida = tmp_path / "ida"
    shutil.copytree(ada, ida)
    edit_json(ida / "kflab-export.json", lambda d: d.update(student="Ida"))
    write_entries(ida, [{k: v for k, v in e.items() if k not in ("hash", "n", "nonce", "prior")}
                        for e in entries(ida)])
    ids: dict[str, str] = {}
    pattern = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    for path in sorted(ida.rglob("*"), key=lambda p: -len(p.parts)):
        new_name = pattern.sub(lambda m: ids.setdefault(m.group(), str(uuid.uuid4())),
                               path.name)
        if path.is_file():
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                text = None
            if text is not None:
                path.write_text(pattern.sub(
                    lambda m: ids.setdefault(m.group(), str(uuid.uuid4())), text))
        if new_name != path.name:
            path.rename(path.with_name(new_name))
    assert ids, "the hand-in holds run ids to rewrite"
    env = {"KFLAB_SCENARIOS": str(lab), "KFLAB_STATE": str(tmp_path / "teacher")}
    for folder in (ada, ida, bob):
        out = run_kflab("scenario", "grade", SID, "--work", str(folder), cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
    out = run_kflab("grade", "collect", "grades", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    ida_line = next(x for x in out.stdout.splitlines()
                    if x.startswith("  Ida / ") and "shares" in x)
    assert "with Ada's hand-in" in ida_line and "run id" not in ida_line, out.stdout
    assert "random mark(s) of a run" in ida_line and "work file(s) of their own" in ida_line
    assert "Bob / " not in out.stdout


def test_rerun_grades_what_the_files_make_not_the_records(hand: Callable[[str], Path],
                                                         state: Path) -> None:
    """--rerun: Ada's files run again and pass; Bob's records forged to claim 'job' (and a
    job record copied in from Ada's hand-in) cannot pass, because his job.yaml is the stub
    the lab ships. The records' edits are not needed to see it."""
    ada = grade(hand("ada"), state, rerun=True)
    assert ada.mode == "rerun" and [s.status for s in ada.steps] == ["passed", "passed"], \
        ada.result
    bob = hand("bob")
    src = hand("ada") / "state" / "resources" / "pytorchjobs"
    shutil.copytree(src, bob / "state" / "resources" / "pytorchjobs")
    edit_json(bob / "state" / "progress" / f"{SID}.json", lambda d: d["steps"].update(
        job={"attempts": 1, "hints": 0, "solved": False, "passed_at": "2026-01-01T10:00:00Z"}))
    assert [s.status for s in grade(bob, state).steps] == ["passed", "passed"]  # records
    result = grade(bob, state, rerun=True)
    assert [s.status for s in result.steps] == ["passed", "changed"], result.result
    assert "apply" in (result.result.steps[1].error or ""), result.result.steps[1]
    assert result.to_dict()["mode"] == "rerun"
