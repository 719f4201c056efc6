"""An append-only log of a learner's guided actions: start, check, hint, solve.

`progress/<id>.json` holds where the learner is now, and `--restart` empties it; the journal
(`progress/<id>.events.jsonl`, one JSON object a line) is never rewritten, so grading can still
say that a step was solved with `kflab solve` before a restart, and how long the work took.
It lives in the learner's own state folder and is no proof against a learner who edits it:
docs/grading.md says so. Each entry carries `n` and `hash` (lab.hashchain): a line removed,
added or edited breaks the chain, and the chain's head is also written into the progress
record, each run's owner record and the export manifest, so a journal rewritten whole (every
hash recomputed) no longer matches them. The chain's first entry carries a random nonce (this
learner's own), the kflab version and `prior`, the number of lines already in the file when
the chain began (a journal from a kflab before the chain): any other unhashed entry is a
signal. `problems` lists what grading reports.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab import __version__, hashchain, limits, state
from lab.hashchain import entry_hash
from lab.kube.conditions import now
from lab.yamlio import read_bytes

EVENTS = ("start", "restart", "resume", "check", "hint", "solve", "skip")
RESERVED = frozenset({"t", "event", "step", "n", "hash", "nonce", "prior", "kflab"})
MAX_READ_BYTES = limits.MAX_JOURNAL_BYTES  # a year of daily work is a few hundred kB


def journal_file(state_root: Path, sid: str) -> Path:
    return state.path(state_root, "progress", f"{sid}.events.jsonl")


def record(state_root: Path, sid: str, event: str, step: str | None = None,
           **extra: Any) -> str | None:
    """Append one event and return its hash (None when it could not be written). O_APPEND
    writes of one short line do not interleave between the learner's terminals, and a
    failure to log never stops the learner's command."""
    if event not in EVENTS or RESERVED & set(extra):
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
            previous, n, lines = hashchain.tail(fd)
            if not previous:  # the chain's first entry: a random nonce makes its hash this
                # learner's alone (two learners who start in the same second write the same
                # time and event), so grading can tell a copied journal from a shared start;
                # `prior` says how many lines an older kflab wrote before it
                entry.update(nonce=secrets.token_hex(8), prior=lines, kflab=__version__)
            entry["n"] = n + 1
            entry["hash"] = entry_hash(previous, entry)
            os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
            return str(entry["hash"])
        finally:
            os.close(fd)  # drops the lock
    except (OSError, state.StateError):
        return None  # progress/<id>.json still records the essentials


def chain_break(events: list[dict[str, Any]]) -> str | None:
    """Where the journal's hashed entries stop chaining (an entry edited, removed or added
    between two hashed ones, or re-numbered), or None when they chain."""
    previous, expect = "", 0
    for n, entry in enumerate(events, 1):
        got = entry.get("hash")
        if not isinstance(got, str):
            continue  # unhashed entries are judged by `problems`
        if n > 1 and "nonce" in entry and not isinstance(events[n - 2].get("hash"), str):
            previous, expect = "", 0  # a chain begun again after an unhashed line
        at = hashchain.place(entry)
        if got != entry_hash(previous, entry) or (expect and at is not None
                                                  and at != expect + 1):
            return (f"entry {n} ({entry.get('event')} at {entry.get('t')}) does not follow "
                    "the one before it: entries were removed or edited")
        previous = got
        expect = at or 0
    return None


def problems(events: list[dict[str, Any]],
             anchors: Sequence[tuple[str, dict[str, Any]]] = ()) -> list[str]:
    """What in a journal shows it was edited: entries with no hash where a hashing kflab
    wrote the journal, a chain that breaks, and anchors (`(where, {"head", "n"})`: the
    progress record, owner records, the export manifest) that the chain no longer holds.
    Signals, not proof: each line says what was seen."""
    if not events:
        return [f"{where} records journal entry {a.get('n')}, but the hand-in's journal is "
                "empty: it was removed or emptied" for where, a in anchors[:1]]
    out = []
    hashed = [i for i, e in enumerate(events) if isinstance(e.get("hash"), str)]
    if not hashed:
        why = (f"although {anchors[0][0]} shows it was written by a kflab that hashes"
               if anchors else "(written by a kflab from before the chain, or the hashes were "
               "removed): none of its entries can be checked")
        return [f"the journal's {len(events)} entries carry no hash {why}"]
    first = events[hashed[0]]
    prior = first.get("prior")
    vouched = prior if isinstance(prior, int) and "nonce" in first else None
    chained = set(hashed)
    loose = [i for i in range(len(events)) if i not in chained]
    before = [i for i in loose if i < hashed[0]]
    if before and vouched != len(before):
        said = ("its first hashed entry says none were there" if vouched == 0 else
                f"its first hashed entry says {vouched} were" if vouched is not None else
                "written by a kflab from before the chain, or added by hand")
        out.append(f"{len(before)} journal entr{'y' if len(before) == 1 else 'ies'} before "
                   f"the chain begins carr{'ies' if len(before) == 1 else 'y'} no hash "
                   f"({_where(events, before)}): {said}")
    after = [i for i in loose if i > hashed[0]]
    if after:
        out.append(f"{len(after)} journal entr{'y' if len(after) == 1 else 'ies'} among the "
                   f"hashed ones carr{'ies' if len(after) == 1 else 'y'} no hash "
                   f"({_where(events, after)}): added or edited by hand")
    broken = chain_break(events)
    if broken:
        out.append(f"the journal no longer chains: {broken}")
    by_n = {hashchain.place(e): e.get("hash") for e in events
            if isinstance(e.get("hash"), str) and hashchain.place(e) is not None}
    for where, a in anchors:
        n, head = a.get("n"), a.get("head")
        if not isinstance(n, int) or not isinstance(head, str):
            out.append(f"{where} holds a journal anchor that is not one kflab writes")
        elif by_n.get(n) != head:
            gone = "no longer holds" if n in by_n else "holds no"
            out.append(f"{where} records journal entry {n} ({head[:12]}), but the journal "
                       f"{gone} such entry: it was rewritten or cut short after that")
    return out


def _where(events: list[dict[str, Any]], idx: list[int]) -> str:
    shown = ", ".join(f"entry {i + 1}: {events[i].get('event')}"
                      + (f" {events[i].get('step')}" if events[i].get("step") else "")
                      for i in idx[:3])
    return shown + (f" and {len(idx) - 3} more" if len(idx) > 3 else "")


def read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The events in `path` (a missing file is no events) and how many lines were unreadable.
    The file comes from a learner's folder: one over MAX_JOURNAL_BYTES, or not a regular
    file, is an InputError naming it (yamlio.read_bytes), never read without bound."""
    if not os.path.lexists(path):
        return [], 0
    raw = read_bytes(path, limit=MAX_READ_BYTES, limit_name="MAX_JOURNAL_BYTES",
                     hint="a journal is written by kflab; export the hand-in again")
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
