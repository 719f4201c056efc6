"""Integrity signals for an instructor: what in a hand-in looks copied, edited or solved.

A hand-in comes from the student's own folder, so nothing here is proof: each signal says
what was seen and where, and the instructor decides (docs/grading.md). Signals:
- a step that passes with no `kflab check` recorded for it (0 attempts);
- `kflab solve` anywhere in the hand-in: progress, journal, or the owner records that every
  run keeps (their command line), even where progress and journal were edited to hide it;
- a journal that shows an edit (lab.scenarios.journal.problems): entries with no hash, a
  chain that breaks, hashes removed, a head that the progress record, an owner record or the
  export manifest recorded and the journal no longer holds; a pass in progress that the
  journal never recorded; an owner record whose command line or solve mark disagrees with
  the journal;
- a lab finished in a small fraction of the time it states;
- (across a class, `kflab grade collect`) two hand-ins of one scenario that share what only
  one run makes (`fingerprint`): run ids, the journal's nonce, and the random marks a run
  leaves that stripping hashes and rewriting run ids leaves in place (the temporary folder
  names in task logs and records, the owner records' tokens), or more than a little of the
  same work the student wrote (files that are neither the lab's starting files nor its
  solutions). Deterministic outputs (a model trained with a fixed seed) are not compared:
  honest students share them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from lab import limits
from lab.errors import InputError
from lab.scenarios import journal
from lab.scenarios.model import Check, Scenario
from lab.yamlio import read_bytes, read_json

FAST_FRACTION = 0.2  # a finished lab under a fifth of its stated duration is a signal
MAX_RECORDS = 2000  # records read for run ids (a hand-in is bounded already)
MAX_MARK_FILES = 2000  # text files searched for a run's random marks
MARK_READ = 1024 * 1024  # bytes of each searched file
MAX_MARKS = 5000  # marks kept in a grade
SHARED_WORK_BYTES = 512  # bytes of a student's own work shared with another: a signal
# What only one run makes, and no copier rewriting run ids (uuids) touches: the names
# tempfile.mkdtemp gives a task's folder (8 random characters), and an owner record's token.
_MARKS = re.compile(rb"\btmp[a-z0-9_]{8}\b|\b[a-z]+\.[a-z0-9-]+\.[a-z0-9.-]+\.[0-9a-f]{12}\b")
_DURATION = re.compile(r"^\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s)?\s*$")


def stated_seconds(duration: str) -> int | None:
    """Seconds of a scenario's stated duration ('20m', '1h30m', '45', '90s'), or None."""
    text = str(duration).strip().lower()
    if text.isdigit():
        return int(text) * 60  # a bare number is minutes, as labs state them
    m = _DURATION.match(text)
    if not m or not any(m.groups()):
        return None
    h, mins, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mins * 60 + s


def check_targets(check: Check) -> list[tuple[str, str, str]]:
    """(kind, name, namespace) of the resource one check reads, if it reads one."""
    p = check.params
    ns = p.get("namespace", "default")
    if check.type == "pipeline-run":
        return [("PipelineRun", p["name"], ns)]
    if check.type == "http-predict":
        return [("InferenceService", p["name"], ns)]
    if "kind" in p and "name" in p:
        return [(p["kind"], p["name"], ns)]
    return []


def _argv(rec: dict[str, Any]) -> list[str]:
    argv = rec.get("argv")
    return [str(a) for a in argv] if isinstance(argv, list) else []


def owner_solves(owner_records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(resource, command line) of each owner record made by `kflab solve`: its command was
    `kflab solve`, or it carries the mark `kflab solve` gives what it starts (lab.hashchain,
    also on a command a solution runs)."""
    found = []
    for rec in owner_records:
        argv = _argv(rec)
        if "solve" in argv[1:3] or rec.get("solve") is not None:
            found.append((str(rec.get("_resource")), " ".join(argv) or "?"))
    return found


def owner_problems(scenario: Scenario, owner_records: list[dict[str, Any]],
                   events: list[dict[str, Any]]) -> list[str]:
    """Owner records that disagree with the journal: a solve mark naming no `solve` entry of
    the journal, a solve mark on a command line no solution runs, or a command line that
    says `kflab solve` on a record that has lost the mark kflab gives it."""
    solves = {e.get("hash") for e in events
              if e.get("event") == "solve" and isinstance(e.get("hash"), str)}
    commands = [[str(a) for a in (act.args["argv"] if isinstance(act.args, dict)
                                  else act.args)][1:]
                for step in scenario.steps for act in step.solve if act.verb == "command"]
    out = []
    for rec in owner_records:
        argv, mark = _argv(rec), rec.get("solve")
        where = f"the owner record of {rec.get('_resource')}"
        says_solve = "solve" in argv[1:3]
        if mark is not None:
            if mark not in solves:
                out.append(f"{where} carries the mark of a `kflab solve` (journal entry "
                           f"{str(mark)[:12]}) that the journal does not hold: the journal "
                           "was edited")
            elif not says_solve and argv[1:] not in commands:
                out.append(f"{where} carries the mark of `kflab solve`, but its command line "
                           f"reads `{' '.join(argv) or '?'}`, which no solution runs: the "
                           "record was edited")
        elif says_solve and isinstance(rec.get("journal"), dict):
            out.append(f"{where} says `{' '.join(argv)}` made it, but has lost the mark that "
                       "kflab gives what `kflab solve` starts: the record was edited")
    return out


def run_ids(state_root: Path) -> list[str]:
    """The ids the student's runs were given (object uids, KFP run ids): copied records keep
    them, so two hand-ins that share one share work."""
    found: set[str] = set()
    base = state_root / "resources"
    files = sorted(base.rglob("*.json"))[:MAX_RECORDS] if base.is_dir() else []

    def walk(value: Any, depth: int = 0) -> None:
        if depth > 12:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("uid", "run_id") and isinstance(v, str) and v:
                    found.add(v)
                else:
                    walk(v, depth + 1)
        elif isinstance(value, list):
            for v in value[:500]:
                walk(v, depth + 1)

    for f in files:
        try:
            walk(read_json(f, limit=limits.MAX_RECORD_BYTES))
        except InputError:
            continue
    return sorted(found)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _files(base: Path, most: int) -> list[Path]:
    out: list[Path] = []
    for top, dirs, names in os.walk(base, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            out.append(Path(top) / name)
            if len(out) >= most:
                return out
    return out


def fingerprint(scenario: Scenario, state_root: Path, workdir: Path) -> dict[str, Any]:
    """What a grade keeps to compare hand-ins across a class (`shared`): run ids, the
    random marks of the runs, and the sha256 (and size) of each work file that is neither
    one of the lab's own files (starting files, solutions) nor empty."""
    marks: set[str] = set()
    for part in ("runs", "resources", "owners", "pipeline-root"):
        base = state_root / part
        for f in _files(base, MAX_MARK_FILES) if base.is_dir() else []:
            try:
                data = read_bytes(f, limit=limits.MAX_RECORD_BYTES)[:MARK_READ]
            except InputError:
                continue
            marks.update(_digest(m) for m in _MARKS.findall(data))
            if len(marks) >= MAX_MARKS:
                break
    shipped = set()
    for f in _files(scenario.root, MAX_MARK_FILES):
        try:
            shipped.add(_digest(read_bytes(f, limit=limits.MAX_RECORD_BYTES)))
        except InputError:
            continue
    work: dict[str, int] = {}
    for f in _files(workdir, MAX_MARK_FILES) if workdir.is_dir() else []:
        try:
            data = read_bytes(f, limit=limits.MAX_RECORD_BYTES)
        except InputError:
            continue
        if data.strip() and _digest(data) not in shipped:
            work[_digest(data)] = len(data)
    return {"run_ids": run_ids(state_root), "marks": sorted(marks)[:MAX_MARKS],
            "work": work}


def signals(scenario: Scenario, handin: Any, steps: list[Any],
            time_spent_s: int | None, owner_hits: list[tuple[str, str]]) -> list[str]:
    """The signals of one hand-in (see the module docstring)."""
    out = []
    graded = [s for s in steps if s.status == "passed"]
    for s in graded:
        if s.attempts == 0:
            out.append(f"step '{s.id}' passes but the session recorded no `kflab check` of it "
                       "(0 attempts): the work or the records may come from someone else")
    solved_flags = [s.id for s in steps if handin.progress["steps"].get(s.id, {}).get("solved")]
    journal_solves = sorted({str(e.get("step")) for e in handin.events
                             if e.get("event") == "solve"})
    for resource, argv in owner_hits:
        where = "" if solved_flags or journal_solves else \
            " although progress and journal record no solve"
        out.append(f"the owner record of {resource} says it was made by `{argv}`{where}")
    out += journal.problems(handin.events, handin.anchors)
    exported = handin.exported_journal
    last = max((e.get("n") for e in handin.events if isinstance(e.get("hash"), str)
                and isinstance(e.get("n"), int)), default=None)
    if exported is not None and isinstance(exported.get("n"), int) and last is not None \
            and last > exported["n"]:
        out.append(f"the journal holds {last - exported['n']} entr"
                   f"{'y' if last - exported['n'] == 1 else 'ies'} written after the export "
                   f"(the export manifest records entry {exported['n']} as the last)")
    out += owner_problems(scenario, handin.owner_records, handin.events)
    # a pass counts as recorded only in a hashed entry, when the journal is hashed at all
    hashed = any(isinstance(e.get("hash"), str) for e in handin.events)
    checked_ok = {e.get("step") for e in handin.events
                  if e.get("event") == "check" and e.get("ok") is True
                  and (not hashed or isinstance(e.get("hash"), str))}
    if handin.events:
        for sid, rec in handin.progress["steps"].items():
            if rec.get("passed_at") and sid not in checked_ok:
                out.append(f"progress says step '{sid}' passed at {rec['passed_at']}, but the "
                           "journal holds no passing check of it")
    elif any(rec.get("passed_at") for rec in handin.progress["steps"].values()):
        out.append("progress records passed steps but the hand-in has no journal")
    stated = stated_seconds(scenario.duration)
    finished = steps and all(s.status in ("passed", "skipped") for s in steps)
    if finished and stated and time_spent_s is not None \
            and time_spent_s < FAST_FRACTION * stated:
        out.append(f"finished in {_short(time_spent_s)}, {time_spent_s * 100 // stated}% of "
                   f"the {scenario.duration} the lab states")
    return out


MIN_COPY_BYTES = 200  # a solution file shorter than this is written the same way by many


def solution_copies(scenario: Scenario, workdir: Path) -> list[tuple[str, str]]:
    """(step id, work file) of each work file that is byte for byte a solution file the
    step's `kflab solve` copies (`copy` actions), when that file is not trivially short."""
    found = []
    for step in scenario.steps:
        for act in step.solve:
            if act.verb != "copy":
                continue
            src, dest = scenario.root / str(act.args["from"]), workdir / str(act.args["to"])
            try:
                ref = read_bytes(src, limit=limits.MAX_RECORD_BYTES)
                if len(ref) >= MIN_COPY_BYTES and \
                        read_bytes(dest, limit=limits.MAX_RECORD_BYTES) == ref:
                    found.append((step.id, str(act.args["to"])))
            except InputError:
                continue
    return found


def copy_signals(copies: list[tuple[str, str]], steps: list[Any]) -> list[str]:
    """A work file that is the lab's solution byte for byte, when no step whose `kflab
    solve` copies it was solved with `kflab solve`."""
    solved = {s.id for s in steps if s.solved_by_solve}
    by_file: dict[str, list[str]] = {}
    for step_id, name in copies:
        by_file.setdefault(name, []).append(step_id)
    return [f"{name} is byte for byte the lab's solution file (what `kflab solve` of step "
            f"'{ids[0]}' copies), but no `kflab solve` of {'it' if len(ids) == 1 else 'them'} "
            "is recorded" for name, ids in by_file.items() if not solved & set(ids)]


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _short(seconds: int) -> str:
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def shared(grades: list[dict[str, Any]]) -> dict[int, list[str]]:
    """Signals across a class: per grade (by index), the other students whose hand-in of
    the same scenario shares run ids or the journal (its first entry's random nonce). Not
    the start time alone: it is kept to the second, and a class told "start now" starts
    many labs in the same second."""
    out: dict[int, list[str]] = {}
    for i, a in enumerate(grades):
        for j, b in enumerate(grades):
            if j <= i or a.get("scenario") != b.get("scenario") \
                    or a.get("student") == b.get("student"):
                continue
            fa, fb = a.get("fingerprint") or {}, b.get("fingerprint") or {}
            same = []
            ids = set(_strs(fa.get("run_ids"))) & set(_strs(fb.get("run_ids")))
            if ids:
                same.append(f"{len(ids)} run id(s)")
            if fa.get("journal_head") and fa.get("journal_head") == fb.get("journal_head"):
                same.append("the journal")
            marks = set(_strs(fa.get("marks"))) & set(_strs(fb.get("marks")))
            if marks:
                same.append(f"{len(marks)} random mark(s) of a run (temporary folder names, "
                            "owner tokens)")
            wa, wb = fa.get("work"), fb.get("work")
            if isinstance(wa, dict) and isinstance(wb, dict):
                common = set(wa) & set(wb)
                size = sum(v for k, v in wa.items() if k in common and isinstance(v, int))
                if size >= SHARED_WORK_BYTES:
                    same.append(f"{len(common)} work file(s) of their own ({size} bytes) "
                                "byte for byte")
            if not same:
                continue
            what = ", ".join(same)
            out.setdefault(i, []).append(f"shares {what} with {b.get('student')}'s hand-in")
            out.setdefault(j, []).append(f"shares {what} with {a.get('student')}'s hand-in")
    return out
