"""The hash chain of a learner's journal, and the anchors that pin it elsewhere.

Each journal entry (lab.scenarios.journal) carries `n` (its place in the chain, from 1) and
`hash`, the SHA-256 of the previous entry's hash and its own content. A chain alone proves
little: the code is public, so anyone can recompute every hash after an edit. What makes an
edit show is that the chain's head is also written, as it grows, into files the learner does
not edit by hand and that are written at other moments: the progress record after each guided
command, the owner record of each run (lab.backends.local.owners) and the export manifest.
An anchor is `{"head": HASH, "n": N}`: entry N of the journal must still have that hash.
Rewriting the journal then means rewriting every anchor too, consistently (docs/grading.md
says what this does and does not prove; `kflab scenario grade --rerun` needs no records).

Standard library only, and below both the scenarios and the backends: owners.py writes
anchors without importing the scenario engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

TAIL_BYTES = 64 * 1024  # the last entry of a journal is one short line
SOLVE_ENV = "KFLAB_SOLVE_ENTRY"  # set while `kflab solve` runs: the hash of its journal entry


def entry_hash(previous: str, entry: dict[str, Any]) -> str:
    """The chain value of `entry` (its `hash` field left out) after `previous`."""
    body = json.dumps({k: v for k, v in entry.items() if k != "hash"}, sort_keys=True)
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


def place(entry: dict[str, Any]) -> int | None:
    """An entry's place in the chain (`n`), or None: a journal from before `n` has none,
    and its hint entries used `n` for the hint's number (kflab now writes `hint`)."""
    n = entry.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None
    if entry.get("event") == "hint" and "hint" not in entry:
        return None
    return n


def tail(fd: int) -> tuple[str, int, int]:
    """(hash, n, lines) of an open journal: the last entry's hash and place ('' and 0 when
    the last line carries none), and how many non-empty lines the file holds (counted only
    when the chain must start afresh, else 0). A last entry with a hash but no place (a
    journal chained before `n`) is continued from: its chain goes on."""
    size = os.fstat(fd).st_size
    raw = os.pread(fd, min(size, TAIL_BYTES), max(0, size - TAIL_BYTES))
    for line in reversed(raw.splitlines()):
        if not line.strip():
            continue
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            entry = json.loads(line)
            value = entry.get("hash")
            if isinstance(value, str):
                return value, place(entry) or 0, 0
        break
    if size == 0:
        return "", 0, 0
    lines, offset = 0, 0
    while offset < size:  # a journal older than `n`, or a line added by hand: count them
        chunk = os.pread(fd, 1024 * 1024, offset)
        if not chunk:
            break
        offset += len(chunk)
        lines += chunk.count(b"\n")
    if not raw.endswith(b"\n"):
        lines += 1
    return "", 0, lines


def anchor(state_root: Path, sid: str) -> dict[str, Any] | None:
    """`{"scenario", "head", "n"}` of scenario `sid`'s journal now, or None without one."""
    path = Path(state_root) / "progress" / f"{sid}.events.jsonl"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head, n, _ = tail(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return {"scenario": sid, "head": head, "n": n} if head else None


def active_anchor(state_root: Path) -> dict[str, Any] | None:
    """The anchor of the scenario the learner is working on (progress/active), if any."""
    try:
        fd = os.open(Path(state_root) / "progress" / "active",
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            sid = os.read(fd, 256).decode("utf-8").strip()
        finally:
            os.close(fd)
    except (OSError, UnicodeDecodeError):
        return None
    if not sid or "/" in sid or sid.startswith("."):
        return None
    return anchor(state_root, sid)
