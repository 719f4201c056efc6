"""Who runs each local resource: one owner (one writer) per resource, and its processes.

The owner is the kflab process that drives a resource -- `kflab apply` running an
Experiment's trials or a PipelineRun's tasks, a PyTorchJob's supervisor -- and holds an
exclusive `flock` on `<state>/owners/<plural>/<ns>/<name>.lock` while it runs. Next to it,
`<name>.json` records the owner (pid, start time, command line, since when, the KFLAB_RUN
token its children carry) and every process it started (pid, start time, argv), written
before anything else happens.

Why a lock and not only a PID file: the kernel releases a flock when its holder dies, even by
SIGKILL, so "is the owner alive?" never depends on a PID that may have been recycled. Hence:
- a second `kflab apply` of the same resource fails at once, naming the owner (one writer);
- `kflab delete` / `kflab down` from any terminal find the owner, ask it to stop (SIGTERM,
  then SIGKILL after a grace period) and stop whatever it left behind;
- any command that finds a resource still "running" whose lock is free knows that its owner
  died, and stops the leftovers before marking it failed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import hashchain, state
from lab.backends.local import procs
from lab.errors import LabError
from lab.kube import names
from lab.kube.conditions import now
from lab.kube.kinds import lookup

STOP_GRACE = 15.0  # seconds an owner gets to stop its children and write its status


class Busy(LabError):
    """Another live kflab process owns the resource."""


def _files(root: Path, kind: str, namespace: str, name: str) -> tuple[Path, Path, Path]:
    k = lookup(kind)
    names.check_kind_name(k.kind, name)
    names.check_namespace(namespace)
    base = ("owners", k.plural, namespace)
    return (state.path(root, *base, f"{name}.lock"), state.path(root, *base, f"{name}.json"),
            state.path(root, *base, f"{name}.stop"))


def _command_line() -> list[str]:
    argv = list(sys.argv)
    if argv and Path(argv[0]).name in ("kflab", "__main__.py"):
        argv[0] = "kflab"
    return argv


@dataclass
class Probe:
    alive: bool
    record: dict[str, Any] | None


class Lease:
    """Held by the owner of one resource while it runs; see the module docstring."""

    def __init__(self, root: Path, kind: str, namespace: str, name: str, fd: int,
                 record: dict[str, Any], previous: dict[str, Any] | None) -> None:
        self.root, self.kind, self.namespace, self.name = root, kind, namespace, name
        self.fd = fd
        self.record = record
        self.previous = previous  # the record a dead earlier owner left, if any
        self.lock_file, self.record_file, self.stop_file = _files(root, kind, namespace, name)
        # Trials that are training jobs start replicas from their own threads (tuning/
        # jobtrial.py): one writer of the record at a time.
        self._mutex = threading.Lock()

    @property
    def token(self) -> str:
        return str(self.record["token"])

    def _save(self) -> None:
        state.write_json(self.record_file, self.record)

    def add(self, label: str, proc: Any, argv: Sequence[str] = ()) -> None:
        """Record a child process (call right after starting it)."""
        rec = procs.ProcRecord.of(label, proc, argv)
        with self._mutex:
            self.record["procs"][label] = {"pid": rec.pid, "started": rec.started,
                                           "argv": rec.argv}
            self._save()

    def drop(self, label: str) -> None:
        """Forget a child that has exited and been reaped."""
        with self._mutex:
            if self.record["procs"].pop(label, None) is not None:
                self._save()

    def stop_request(self) -> dict[str, Any] | None:
        """Who asked this owner to stop (`kflab delete`, `kflab down`), if anyone did."""
        with contextlib.suppress(LabError):
            return state.read_json(self.stop_file)
        return None

    def stop_previous(self) -> int:
        """Stop whatever a dead earlier owner of this resource left running."""
        if not self.previous:
            return 0
        return stop_leftovers(self.previous)

    def hand_over(self, pid: int, argv: Sequence[str]) -> None:
        """The owner is now `pid` (a background supervisor started with this lock's file
        descriptor): record it, then let go of our copy of the descriptor without unlocking
        (the lock lives on in the child)."""
        self.record.update(pid=pid, started=procs.start_time(pid), argv=[str(a) for a in argv])
        self._save()
        os.close(self.fd)
        self.fd = -1

    def forget(self) -> None:
        """The resource is gone: drop its owner record (the lock file stays, so that a
        process about to lock it never locks a file that another has replaced)."""
        with contextlib.suppress(LabError):
            state.remove(self.root, self.record_file)

    def release(self) -> None:
        if self.fd < 0:
            return
        with contextlib.suppress(LabError):
            state.remove(self.root, self.stop_file)
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _open_lock(lock_file: Path) -> int:
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise state.io_error(exc, lock_file, "lock") from None


def _try_lock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


def describe(record: dict[str, Any] | None) -> str:
    if not record:
        return "another kflab process"
    cmd = " ".join(record.get("argv") or []) or "?"
    return f"pid {record.get('pid')} (`{cmd}`, since {record.get('since', '?')})"


def acquire(root: Path, kind: str, namespace: str, name: str, *, wait: float = 0.5) -> Lease:
    """Become the owner of the resource, or fail fast with Busy naming the current owner.
    `wait` only rides out another command's brief look at the lock."""
    k = lookup(kind)
    lock_file, record_file, stop_file = _files(root, k.kind, namespace, name)
    fd = _open_lock(lock_file)
    deadline = time.monotonic() + wait
    while not _try_lock(fd, fcntl.LOCK_EX):
        if time.monotonic() >= deadline:
            os.close(fd)
            other = None
            with contextlib.suppress(LabError):
                other = state.read_json(record_file)
            raise Busy(f"{k.kind} '{name}' in namespace '{namespace}' is being run by "
                       f"another kflab process: {describe(other)}",
                       hint=f"wait for it to finish, or stop it with `kflab delete "
                            f"{k.plural} {name} -n {namespace}`") from None
        time.sleep(0.05)
    try:
        previous = state.read_json(record_file)
    except LabError:
        previous = None
    try:
        cwd = os.getcwd()
    except OSError:  # the folder it ran in was removed
        cwd = None
    record = {"kind": k.kind, "namespace": namespace, "name": name, "pid": os.getpid(),
              "started": procs.start_time(os.getpid()), "argv": _command_line(), "cwd": cwd,
              "since": now(), "token": f"{k.plural}.{namespace}.{name}.{uuid.uuid4().hex[:12]}",
              "procs": {}}
    # For grading (lab.hashchain): the learner's journal head when this run started, and
    # the journal entry of the `kflab solve` that started it, if one did.
    mark = hashchain.active_anchor(root)
    if mark is not None:
        record["journal"] = mark
    if os.environ.get(hashchain.SOLVE_ENV):
        record["solve"] = os.environ[hashchain.SOLVE_ENV][:64]
    lease = Lease(root, k.kind, namespace, name, fd, record, previous)
    try:
        state.remove(root, stop_file)
        lease._save()
    except BaseException:
        lease.release()
        raise
    return lease


def adopt(root: Path, kind: str, namespace: str, name: str, fd: int) -> Lease:
    """In a background supervisor: take over the lease whose lock descriptor was passed in."""
    k = lookup(kind)
    _, record_file, _ = _files(root, k.kind, namespace, name)
    if not _try_lock(fd, fcntl.LOCK_EX):
        raise Busy(f"{k.kind} '{name}': the lock handed to this supervisor is not held")
    record = state.read_json(record_file) or {}
    record.update(pid=os.getpid(), started=procs.start_time(os.getpid()))
    record.setdefault("procs", {})
    record.setdefault("token", f"{k.plural}.{namespace}.{name}.{uuid.uuid4().hex[:12]}")
    lease = Lease(root, k.kind, namespace, name, fd, record, None)
    lease._save()
    return lease


def probe(root: Path, kind: str, namespace: str, name: str) -> Probe:
    """Whether a live process owns the resource, and the last owner record."""
    lock_file, record_file, _ = _files(root, kind, namespace, name)
    try:
        record = state.read_json(record_file)
    except LabError:
        record = None
    try:
        fd = os.open(lock_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Probe(False, record)
    except OSError as exc:
        raise state.io_error(exc, lock_file, "read") from None
    try:
        free = _try_lock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)  # closing drops our shared lock, if we took it
    return Probe(not free, record)


def _records(record: dict[str, Any]) -> list[procs.ProcRecord]:
    out = []
    for label, rec in (record.get("procs") or {}).items():
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out.append(procs.ProcRecord(label, int(rec["pid"]), rec.get("started"),
                                        list(rec.get("argv") or [])))
    return out


def stop_leftovers(record: dict[str, Any] | None, grace: float = 3.0) -> int:
    """Stop every process a (dead) owner recorded or tagged; returns how many were alive."""
    if not record:
        return 0
    return procs.stop_all(_records(record), record.get("token"), grace)


def stop(root: Path, kind: str, namespace: str, name: str, *, by: str,
         grace: float = STOP_GRACE) -> int:
    """Stop the resource's owner, from any process: SIGTERM (it stops its children and
    writes a status naming `by`), SIGKILL after `grace` seconds, then whatever is left.
    Returns how many processes were stopped (the owner included)."""
    _, record_file, stop_file = _files(root, kind, namespace, name)
    found = probe(root, kind, namespace, name)
    stopped = 0
    rec = found.record or {}
    pid, started = rec.get("pid"), rec.get("started")
    if found.alive and isinstance(pid, int) and pid != os.getpid() \
            and procs.is_running(pid, started):
        with contextlib.suppress(LabError):
            state.write_json(stop_file, {"by": by, "pid": os.getpid(), "at": now()})
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        stopped += 1
        if not _wait_free(root, kind, namespace, name, grace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if procs.is_running(pid, started):
                    os.kill(pid, signal.SIGKILL)
            _wait_free(root, kind, namespace, name, 5.0)
        with contextlib.suppress(LabError):
            rec = state.read_json(record_file) or rec  # children recorded meanwhile
    elif found.alive:
        return 0  # owned by this very process, or by one we may not signal
    return stopped + stop_leftovers(rec)


def _wait_free(root: Path, kind: str, namespace: str, name: str, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not probe(root, kind, namespace, name).alive:
            return True
        time.sleep(0.05)
    return False


def owned(root: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, namespace, name) of every resource that has ever had an owner record."""
    base = state.path(root, "owners")
    for lock in sorted(base.glob("*/*/*.lock")):
        plural, namespace = lock.parent.parent.name, lock.parent.name
        try:
            kind = lookup(plural).kind
            names.check_kind_name(kind, lock.stem)
            names.check_namespace(namespace)
        except LabError:
            continue  # not a file kflab wrote
        yield kind, namespace, lock.stem


def dead_owner_reason(record: dict[str, Any] | None, leftovers: int) -> str:
    """The status message for a resource whose owner died without finishing it."""
    stopped = (f"; kflab stopped {leftovers} leftover process(es)" if leftovers
               else "; no process of it was left running")
    if not record:
        return "no kflab process is running it any more (its owner record is missing)" + \
            stopped
    return (f"the kflab process that ran it ({describe(record)}) ended without finishing it "
            f"(killed, or its terminal was closed){stopped}")
