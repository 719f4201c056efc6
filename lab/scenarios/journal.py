"""An append-only log of a learner's guided actions: start, check, hint, solve.

`progress/<id>.json` holds where the learner is now, and `--restart` empties it; the journal
(`progress/<id>.events.jsonl`, one JSON object a line) is never rewritten, so grading can still
say that a step was solved with `kflab solve` before a restart, and how long the work took.
It lives in the learner's own state folder and is no proof against a learner who edits it:
docs/grading.md says so.
"""

from __future__ import annotations

import json
import os
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
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    try:
        target = journal_file(state_root, sid)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except (OSError, state.StateError):
        pass  # progress/<id>.json still records the essentials


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
