"""An append-only log of a learner's guided actions: start, check, hint, solve.

`progress/<id>.json` holds where the learner is now, and `--restart` empties it; the journal
(`progress/<id>.events.jsonl`, one JSON object a line) is never rewritten, so grading can still
say that a step was solved with `kflab solve` before a restart, and how long the work took.
It lives in the learner's own state folder and is no proof against a learner who edits it:
docs/grading.md says so. Each entry carries `hash`, the SHA-256 of the previous entry's hash
and its own content, so a line removed or edited in the middle breaks the chain and grading
says so (a signal, not proof: a learner who rewrites every later hash is not caught).
Journals written before the chain existed have no `hash` and read as unchained, not broken.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from lab import state
from lab.kube.conditions import now

EVENTS = ("start", "restart", "resume", "check", "hint", "solve", "skip")
MAX_READ_BYTES = 8 * 1024 * 1024  # a year of daily work is a few hundred kB


def journal_file(state_root: Path, sid: str) -> Path:
    return state.path(state_root, "progress", f"{sid}.events.jsonl")


def record(state_root: Path, sid: str, event: str, step: str | None = None,
           **extra: Any) -> None:
    """Append one event. O_APPEND writes of one short line do not interleave between the
    learner's terminals, and a failure to log never stops the learner's command."""
    if event not in EVENTS:
        raise ValueError(event)
    entry = {"t": now(), "event": event, **({"step": step} if step else {}), **extra}
    try:
        target = journal_file(state_root, sid)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            # The lock keeps "read the last hash, append" whole between two terminals.
            fcntl.flock(fd, fcntl.LOCK_EX)
            previous = _last_hash(fd)
            if not previous:  # the chain's first entry: a random nonce makes its hash this
                # learner's alone (two learners who start in the same second write the same
                # time and event), so grading can tell a copied journal from a shared start
                entry["nonce"] = secrets.token_hex(8)
            entry["hash"] = entry_hash(previous, entry)
            os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)  # drops the lock
    except (OSError, state.StateError):
        pass  # progress/<id>.json still records the essentials


def entry_hash(previous: str, entry: dict[str, Any]) -> str:
    """The chain value of `entry` (its `hash` field left out) after `previous`."""
    body = json.dumps({k: v for k, v in entry.items() if k != "hash"}, sort_keys=True)
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


def _last_hash(fd: int) -> str:
    """The `hash` of the file's last entry ('' for an empty or unchained journal)."""
    size = os.fstat(fd).st_size
    tail = os.pread(fd, min(size, 64 * 1024), max(0, size - 64 * 1024))
    for line in reversed(tail.splitlines()):
        if line.strip():
            with contextlib.suppress(ValueError, AttributeError):
                value = json.loads(line).get("hash")
                return value if isinstance(value, str) else ""
            return ""
    return ""


def chain_break(events: list[dict[str, Any]]) -> str | None:
    """Where the journal's entries stop chaining, or None when they chain (or when none
    carries a hash: a journal older than the chain). Entries before the first hashed one
    are older than the chain and are not judged."""
    previous, hashed = "", False
    for n, entry in enumerate(events, 1):
        got = entry.get("hash")
        if not isinstance(got, str):
            if hashed:
                return f"entry {n} ({entry.get('event')} at {entry.get('t')}) has no hash"
            continue
        hashed = True
        if got != entry_hash(previous, entry):
            return (f"entry {n} ({entry.get('event')} at {entry.get('t')}) does not follow "
                    "the one before it: entries were removed or edited")
        previous = got
    return None


def read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The events in `path` (a missing file is no events) and how many lines were unreadable.
    Only the first MAX_READ_BYTES are read: the file comes from a learner's folder."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_READ_BYTES)
    except FileNotFoundError:
        return [], 0
    events, bad = [], 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(item, dict) and item.get("event") in EVENTS \
                and isinstance(item.get("t"), str):
            events.append(item)
        else:
            bad += 1
    return events, bad
