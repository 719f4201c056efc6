"""Hand-ins: what a student gives an instructor, and how the instructor's kflab opens it.

`kflab progress export` (export.py) writes one folder (or a .tar.gz of it):

    kflab-export.json           who, when, which scenarios, the original paths
    state/progress/<id>.json    the guided progress (attempts, hints, solved by `kflab solve`)
    state/progress/<id>.events.jsonl   the journal of every start, check, hint and solve
    state/resources/...         the objects the student's runs made (their status is the record)
    state/runs/...              their logs, artifacts and plots
    state/owners/...            the owner record of each run (which command made it)
    work/<id>/...               the student's work folder for each scenario

Grading never reads a hand-in in place: `unpack` copies it into a fresh sandbox (regular files
and folders only; links and devices are left out and said so), within size and count limits,
and rewrites the absolute paths the records hold (artifact paths, plots) from the student's
machine to the sandbox, so every check reads the student's files and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import limits, state
from lab.errors import InputError, LabError
from lab.limits import MAX_HANDIN_BYTES, MAX_HANDIN_DEPTH, MAX_HANDIN_FILES, limit
from lab.scenarios import journal
from lab.yamlio import read_json

MANIFEST = "kflab-export.json"
FORMAT = 1
# What of the state folder travels besides progress: the records, their run folders, and the
# pipeline root (task outputs; a cached task's outputs live under the run that made them).
STATE_PARTS = ("resources", "runs", "pipeline-root")
# Left out of work folders: caches and environments a student may keep there (big, not work).
SKIP_NAMES = frozenset({"__pycache__", ".venv", "venv", ".git", ".ipynb_checkpoints", ".kflab"})
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
_STUDENT_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f/\\]")
MAX_MANIFEST_BYTES = limits.MAX_MANIFEST_BYTES


@dataclass
class Budget:
    """Counts what a copy has taken so far against the hand-in limits."""

    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)

    def take(self, size: int, where: str) -> None:
        self.files += 1
        self.bytes += size
        if self.files > MAX_HANDIN_FILES:
            raise LabError(limit(f"{where}: files in the hand-in:", f"more than {self.files - 1}",
                                 MAX_HANDIN_FILES, "MAX_HANDIN_FILES"),
                           hint="leave data sets and environments out of the work folder")
        if self.bytes > MAX_HANDIN_BYTES:
            raise LabError(limit(f"{where}: size of the hand-in:", f"{self.bytes} bytes",
                                 MAX_HANDIN_BYTES, "MAX_HANDIN_BYTES"),
                           hint="leave data sets, models you can re-create and environments "
                                "out of the work folder")


def student_name(raw: str, where: str = "--student") -> str:
    """A student's name or id as it will appear in grade files: printable, one line."""
    name = raw.strip() if isinstance(raw, str) else ""
    if not name or len(name) > 100 or _STUDENT_BAD.search(name):
        raise LabError(f"{where}: {raw!r} is not a usable student name",
                       hint="give 1 to 100 printable characters, without '/' or '\\', "
                            "e.g. --student 'Ada Lovelace' or a student number")
    return name


def slug(name: str) -> str:
    """A file-system-safe folder name for a student (grades/<slug>/)."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "student"
    return text[:80]


# --- what an export and an unpacking share (export.py writes a hand-in) -------------------

def is_export(path: Path) -> bool:
    """Whether `path` is a hand-in written by `kflab progress export` (a folder with the
    manifest, or an archive whose first members hold it), so that a later export from the same
    work folder leaves it out."""
    if path.is_dir():
        return (path / MANIFEST).is_file()
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        return False
    try:
        with tarfile.open(path, "r:*") as tar:
            for i, member in enumerate(tar):
                if member.name.rsplit("/", 1)[-1] == MANIFEST:
                    return True
                if i >= 2:
                    return False
    except (tarfile.TarError, EOFError, OSError):
        return False
    return False


def copy_file(src: Path, dest: Path, budget: Budget) -> None:
    size = src.stat().st_size
    budget.take(size, str(src))
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest, follow_symlinks=False)
    dest.chmod(0o755 if os.access(src, os.X_OK) else 0o644)


def copy_tree(src: Path, dest: Path, budget: Budget, *, skip: frozenset[str] = frozenset(),
              label: str | None = None, avoid: tuple[Path, ...] = (),
              exports: bool = False) -> None:
    """Copy regular files and folders only; a link (to anything) or a device is left out and
    noted, so a copy never reaches outside `src`. Paths in `avoid` (the export being written,
    a state folder kept inside the work folder) are passed over; with `exports`, so are
    earlier exports (noted)."""
    label = label or str(src)
    dest.mkdir(parents=True, exist_ok=True)
    avoided = {a.resolve() for a in (*avoid, dest)}
    for top, dirs, files in os.walk(src, followlinks=False):
        rel = Path(top).relative_to(src)
        keep = []
        for d in sorted(dirs):
            full = Path(top) / d
            if full.resolve() in avoided:
                continue
            if d in skip:
                budget.left_out.append(f"{label}/{rel / d}/ (not part of the work)")
            elif full.is_symlink():
                budget.left_out.append(f"{label}/{rel / d} (a link)")
            elif exports and is_export(full):
                budget.left_out.append(f"{label}/{rel / d}/ (an earlier export)")
            else:
                keep.append(d)
                (dest / rel / d).mkdir(parents=True, exist_ok=True)
        dirs[:] = keep
        for f in sorted(files):
            full = Path(top) / f
            mode = full.lstat().st_mode
            if full.resolve() in avoided and not stat.S_ISLNK(mode):
                continue
            if stat.S_ISLNK(mode):
                budget.left_out.append(f"{label}/{rel / f} (a link)")
            elif not stat.S_ISREG(mode):
                budget.left_out.append(f"{label}/{rel / f} (not a regular file)")
            elif exports and is_export(full):
                budget.left_out.append(f"{label}/{rel / f} (an earlier export)")
            elif f not in skip:
                copy_file(full, dest / rel / f, budget)


# --- open (the instructor's side) ------------------------------------------------------------

@dataclass
class HandIn:
    """A hand-in unpacked into a grading sandbox."""

    student: str
    source: str  # what the instructor named (folder or archive)
    progress: dict[str, Any]
    events: list[dict[str, Any]]
    notes: list[str]
    exported_at: str | None = None
    backend: str = "local"  # where the student's session ran its workloads
    # owner records of the student's runs (which command made each), `_resource` added
    owner_records: list[dict[str, Any]] = field(default_factory=list)
    # where the journal's head was written besides the journal (lab.hashchain):
    # (what, {"head", "n"}) for the progress record, owner records and the export manifest
    anchors: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    exported_journal: dict[str, Any] | None = None  # the export manifest's anchor


def unpack(source: Path, sid: str, dest_state: Path, dest_work: Path, *,
           student: str | None = None, student_state: Path | None = None) -> HandIn:
    """Copy the hand-in `source` for scenario `sid` into the sandbox folders.

    `source` is what `kflab progress export` wrote (a folder or an archive), or a work folder
    whose state folder is `student_state` (default: `source/.kflab`).
    """
    if not source.exists():
        raise LabError(f"{source} does not exist",
                       hint="name a student's hand-in folder or archive")
    budget = Budget()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="handin-", dir=dest_state.parent) as tmp:
        if source.is_file():
            if not source.name.endswith(ARCHIVE_SUFFIXES):
                raise LabError(f"{source} is neither a folder nor a .tar.gz/.tgz/.tar archive",
                               hint="hand in what `kflab progress export` writes")
            root = _extract(source, Path(tmp), budget)
        else:
            root = source
        manifest = _manifest(root) if (root / MANIFEST).exists() else None
        if manifest is not None:
            if student_state is not None:
                raise LabError(f"{source} is a kflab export: it carries its own state folder",
                               hint="leave out --student-state")
            s_state, s_work = root / "state", root / "work" / sid
            info = manifest["scenarios"].get(sid)
            if info is None:
                raise LabError(f"{source} holds no work for scenario '{sid}' (it has: "
                               f"{', '.join(sorted(manifest['scenarios'])) or 'none'})",
                               hint="grade one of those, or ask the student to export this one")
            old_state, old_work = manifest["state_root"], info["workdir"]
            name = student or manifest["student"]
        else:
            s_state = student_state or root / ".kflab"
            s_work = root
            old_state, old_work = str(s_state.resolve()), None
            name = student or root.resolve().name
        name = student_name(name, "student name" if student is None else "--student")
        if not (s_state / "progress" / f"{sid}.json").is_file():
            raise LabError(f"no kflab progress for '{sid}' in {source}"
                           + ("" if manifest else f" (looked in {s_state}/progress)"),
                           hint="hand in the folder or archive that `kflab progress export "
                                "--student NAME --out PATH` writes, or name the student's "
                                "state folder with --student-state")
        if not s_work.is_dir():
            raise LabError(f"{source} has no work folder for '{sid}'",
                           hint="export again with `kflab progress export`")
        # Only this scenario's progress and journal, and the records its checks read.
        for name_ in (f"{sid}.json", f"{sid}.events.jsonl"):
            src = s_state / "progress" / name_
            if src.is_file() and not src.is_symlink():
                copy_file(src, dest_state / "progress" / name_, budget)
        for part in STATE_PARTS:
            if (s_state / part).is_dir() and not (s_state / part).is_symlink():
                copy_tree(s_state / part, dest_state / part, budget, label=f"state/{part}")
        copy_tree(s_work, dest_work, budget, skip=SKIP_NAMES if manifest is None else frozenset(),
                  label="work")
        owner_records = read_owner_records(s_state)
    progress = state.read_json(dest_state / "progress" / f"{sid}.json",
                               fix="ask the student to export again") or {}
    old_work = old_work or str(progress.get("workdir") or "")
    moves = {old_state: str(dest_state), old_work: str(dest_work)}
    for root in moved_roots(dest_state):  # a state folder moved with `mv` before the export
        moves.setdefault(root, str(dest_state))
    rebase(dest_state, moves)
    try:
        events, bad = journal.read(dest_state / "progress" / f"{sid}.events.jsonl")
    except InputError as exc:
        raise LabError(f"{source}: the journal {Path(exc.file or '').name}: {exc.problem}",
                       hint="a journal is written by kflab: ask the student to export "
                            "again") from None
    if bad:
        notes.append(f"{bad} unreadable line(s) in the journal were ignored")
    if budget.left_out:
        notes.append("left out of the hand-in: " + ", ".join(budget.left_out[:20])
                     + (f" and {len(budget.left_out) - 20} more" if len(budget.left_out) > 20
                        else ""))
    exported = (manifest["scenarios"][sid].get("journal") if manifest else None)
    exported = exported if isinstance(exported, dict) else None
    return HandIn(name, str(source.resolve()), normalise_progress(progress), events, notes,
                  manifest.get("exported_at") if manifest else None, session_backend(progress),
                  owner_records, anchors(sid, progress, owner_records, exported), exported)


def anchors(sid: str, progress: Any, owner_records: list[dict[str, Any]],
            exported: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """Every place besides the journal that recorded its head (see lab.hashchain)."""
    found: list[tuple[str, dict[str, Any]]] = []
    mark = progress.get("journal") if isinstance(progress, dict) else None
    if isinstance(mark, dict):
        found.append(("the progress record", mark))
    for rec in owner_records:
        mark = rec.get("journal")
        if isinstance(mark, dict) and mark.get("scenario") == sid:
            found.append((f"the owner record of {rec.get('_resource')}", mark))
    if exported is not None:
        found.append(("the export manifest", exported))
    return found


def read_owner_records(state_root: Path, limit_: int = 500) -> list[dict[str, Any]]:
    """The owner records under `state_root/owners` (read, never copied into the sandbox: a
    live-looking owner there would make the sandbox's backend wait on it)."""
    base = state_root / "owners"
    out = []
    for rec in sorted(base.glob("*/*/*.json"))[:limit_] if base.is_dir() else []:
        if rec.is_symlink():
            continue
        try:
            data = read_json(rec, limit=MAX_MANIFEST_BYTES, limit_name="MAX_MANIFEST_BYTES")
        except InputError:
            continue
        if isinstance(data, dict):
            data["_resource"] = f"{rec.parent.parent.name}/{rec.parent.name}/{rec.stem}"
            out.append(data)
    return out


def session_backend(progress: Any) -> str:
    """Which backend a guided session ran on ('local' when the record does not say)."""
    saved = progress.get("backend") if isinstance(progress, dict) else None
    name = saved.get("name") if isinstance(saved, dict) else None
    return name if isinstance(name, str) and name else "local"


def _manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    where = str(path)
    if path.is_symlink():
        raise LabError(f"{where}: a link, not the manifest `kflab progress export` writes",
                       hint="export the hand-in again with `kflab progress export`")
    try:  # capped before it is read, never a FIFO or a device; depth-bounded
        data = read_json(path, limit=MAX_MANIFEST_BYTES, limit_name="MAX_MANIFEST_BYTES")
    except InputError as exc:
        raise LabError(f"{where}: not readable JSON ({exc.problem[:200]})",
                       hint="export the hand-in again with `kflab progress export`") from None
    problems = []
    if not isinstance(data, dict) or data.get("kind") != "kflab-export":
        problems.append("kind: expected 'kflab-export'")
        data = data if isinstance(data, dict) else {}
    if data.get("format") != FORMAT:
        problems.append(f"format: expected {FORMAT}, got {data.get('format')!r} (export it "
                        "with this kflab version)")
    for key in ("student", "state_root"):
        if not isinstance(data.get(key), str):
            problems.append(f"{key}: expected text")
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("workdir"), str)
            for v in scenarios.values()):
        problems.append("scenarios: expected a mapping of scenario id to {workdir: ...}")
    if problems:
        raise LabError(f"{where}: field '{problems[0].split(':')[0]}': "
                       f"{problems[0].split(': ', 1)[1]}",
                       hint="export the hand-in again with `kflab progress export`")
    return data


def _extract(archive: Path, into: Path, budget: Budget) -> Path:
    """Extract an archive safely and return the folder that holds the export (the archive's
    single top folder, or its root). Only folders and regular files are written, each at a
    relative path inside `into` with no '..' and no absolute name; links and devices are left
    out entirely. Done by hand rather than with tarfile's 'data' filter, which Python 3.11.2
    (Debian 12's python3) does not have."""
    root = into.resolve()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if not (member.isdir() or member.isreg()):
                    budget.left_out.append(f"{member.name} (not a regular file)")
                    continue
                target = _member_path(archive, member.name, root)
                if member.isdir():
                    budget.take(0, f"{archive}: {member.name}")  # folders count as files
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                budget.take(member.size, f"{archive}: {member.name}")
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:  # pragma: no cover - a regular member always has data
                    continue
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                target.chmod(0o644 | (0o111 if member.mode & 0o100 else 0))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise LabError(f"{archive}: not a readable archive ({exc})",
                       hint="hand in what `kflab progress export --out NAME.tar.gz` "
                            "writes") from None
    entries = [p for p in into.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and not (into / MANIFEST).exists():
        return entries[0]
    return into


def _member_path(archive: Path, name: str, root: Path) -> Path:
    """Where an archive member goes under `root`; an absolute name, a '..' or a name that
    would land outside `root` is refused (as tarfile's 'data' filter refuses them)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if name.startswith(("/", "\\")) or ".." in parts or not parts or "\x00" in name:
        raise LabError(f"{archive}: unsafe member {name!r}: outside the hand-in folder",
                       hint="export the hand-in again with `kflab progress export`; "
                            "do not build the archive by hand")
    if len(parts) > MAX_HANDIN_DEPTH:
        raise LabError(limit(f"{archive}: folders in the path of member {name[:80]!r}...:",
                             len(parts), MAX_HANDIN_DEPTH, "MAX_HANDIN_DEPTH"),
                       hint="export the hand-in again with `kflab progress export`")
    target = root.joinpath(*parts)
    # A folder member of the archive cannot be a link (links are never written), so the
    # resolved parent stays under root; checked anyway, as the filter does.
    if root not in target.parent.resolve().parents and target.parent.resolve() != root:
        raise LabError(f"{archive}: unsafe member {name!r}: outside the hand-in folder",
                       hint="export the hand-in again with `kflab progress export`")
    return target


# --- paths recorded on the student's machine -------------------------------------------------

def rebase(state_root: Path, moves: dict[str, str]) -> int:
    """Rewrite absolute paths in the records under `state_root/resources` from the student's
    folders to the sandbox's; returns how many records changed."""
    pairs = [(old.rstrip("/"), new) for old, new in moves.items()
             if old and old.startswith("/") and old.rstrip("/")]
    if not pairs:
        return 0
    # Longest first, and only at a path boundary: /home/a/lab2 is not inside /home/a/lab.
    pairs.sort(key=lambda p: len(p[0]), reverse=True)
    pattern = re.compile("(?:^|(?<=[\\s,:=/]))(?:" + "|".join(
        f"({re.escape(old)})" for old, _ in pairs) + ")(?=/|$|,)")

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: pairs[m.lastindex - 1][1], value)  # type: ignore[operator]
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    changed = 0
    base = state_root / "resources"
    for path in sorted(base.rglob("*.json")) if base.is_dir() else []:
        try:
            data = read_json(path, limit=limits.MAX_RECORD_BYTES)
        except InputError:
            continue  # the store reports a corrupt record when a check reads it
        new = fix(data)
        if new != data:
            path.write_text(json.dumps(new, indent=2) + "\n")
            changed += 1
    return changed


MARKERS = ("pipeline-root", "runs")  # state-folder parts that records name by absolute path


def moved_roots(state_root: Path, most: int = 2000) -> set[str]:
    """Earlier places of a state folder, as its records name them: `OLD/pipeline-root/...`
    or `OLD/runs/...` where `state_root` holds that very file or folder now (a state folder
    moved with `mv` keeps records that name its old place)."""
    found: set[str] = set()
    seen: set[str] = set()

    def walk(value: Any, depth: int = 0) -> None:
        if depth > limits.MAX_DEPTH:
            return
        if isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, list):
            for v in value[:1000]:
                walk(v, depth + 1)
        elif isinstance(value, str) and value.startswith("/") and len(value) < 4096:
            parts = Path(value).parts
            for i in range(len(parts) - 2, 0, -1):
                if parts[i] in MARKERS:
                    prefix = str(Path(*parts[:i]))
                    if prefix not in seen and prefix != str(state_root):
                        seen.add(prefix)
                        if state_root.joinpath(*parts[i:i + 2]).exists():
                            found.add(prefix)
                    break

    base = state_root / "resources"
    for path in sorted(base.rglob("*.json"))[:most] if base.is_dir() else []:
        try:
            walk(read_json(path, limit=limits.MAX_RECORD_BYTES))
        except InputError:
            continue
    return found


def normalise_progress(raw: Any) -> dict[str, Any]:
    """The progress record with every field the grade reads, of the right type (a hand-in
    is student-controlled: a wrong type reads as nothing recorded)."""
    raw = raw if isinstance(raw, dict) else {}
    steps = raw.get("steps") if isinstance(raw.get("steps"), dict) else {}

    def count(v: Any) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    clean = {}
    for sid, rec in steps.items():
        rec = rec if isinstance(rec, dict) else {}
        clean[str(sid)] = {"attempts": count(rec.get("attempts")),
                           "hints": count(rec.get("hints")),
                           "solved": rec.get("solved") is True,
                           "passed_at": rec.get("passed_at")
                           if isinstance(rec.get("passed_at"), str) else None}
    return {"current": count(raw.get("current")),
            "started_at": raw.get("started_at") if isinstance(raw.get("started_at"), str)
            else None,
            "steps": clean}
