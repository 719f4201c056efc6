"""Local processes kflab starts: foreground children and tracked background servers.

Each child gets its own process group so that stopping it stops everything it spawned
(torch workers, uvicorn workers). Background processes are recorded in `<state>/procs/`
with their kernel start time, so a recycled PID is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lab.state import read_json, write_json

LOOPBACK = "127.0.0.1"  # every local server and rendezvous binds here, never elsewhere


def free_port() -> int:
    """A TCP port free on the loopback interface right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = raw.rsplit(")", 1)[1].split()
    return int(fields[19])


def is_running(pid: int, ticks: int | None = None) -> bool:
    """True if PID is alive (not a zombie) and, when given, started at `ticks`."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = raw.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    return ticks is None or int(fields[19]) == ticks


def kill_group(pgid: int, grace: float = 5.0) -> None:
    """SIGTERM the group led by `pgid`; once the leader is gone (or after `grace` seconds)
    SIGKILL the group so that no straggler it spawned survives."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and is_running(pgid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def popen(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = subprocess.STDOUT,
) -> subprocess.Popen[bytes]:
    """Start argv (never through a shell) as the leader of a new process group."""
    return subprocess.Popen(
        list(argv), cwd=cwd, env=dict(env) if env is not None else None,
        stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True,
    )


class ChildGroup:
    """Foreground children that must not outlive the command (Ctrl-C, errors, exit).

    Use as a context manager: every process started through it is killed with its whole
    process group on the way out, whatever the reason.
    """

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = popen(argv, **kwargs)
        self.procs.append(proc)
        return proc

    def stop_all(self, grace: float = 3.0) -> None:
        """TERM every group, wait up to `grace`, then KILL what is left and reap."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> ChildGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


@dataclass
class Tracked:
    """A background process recorded in the state folder."""

    id: str
    pid: int
    ticks: int | None
    argv: list[str]
    log: str
    owner: str

    @property
    def running(self) -> bool:
        return is_running(self.pid, self.ticks)


class Registry:
    """Background processes that outlive the CLI command (model servers)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "procs"

    def _path(self, pid_id: str) -> Path:
        return self.dir / f"{pid_id}.json"

    def spawn(
        self, pid_id: str, argv: Sequence[str], *, owner: str, log: Path,
        cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
    ) -> Tracked:
        """Start argv detached, logging to `log`, and record it under `pid_id`."""
        self.stop(pid_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            proc = popen(argv, cwd=cwd, env=env, stdout=fh)
        rec = Tracked(pid_id, proc.pid, start_ticks(proc.pid), list(argv), str(log), owner)
        write_json(self._path(pid_id), rec.__dict__)
        return rec

    def get(self, pid_id: str) -> Tracked | None:
        data = read_json(self._path(pid_id))
        return Tracked(**data) if data else None

    def all(self) -> list[Tracked]:
        out = []
        for path in sorted(self.dir.glob("*.json")):
            data = read_json(path)
            if data:
                out.append(Tracked(**data))
        return out

    def stop(self, pid_id: str, grace: float = 5.0) -> bool:
        """Stop the process (and its group) if it is ours and alive; forget it either way."""
        rec = self.get(pid_id)
        if rec is None:
            return False
        if rec.running:
            kill_group(rec.pid, grace)
        self._path(pid_id).unlink(missing_ok=True)
        return True

    def stop_all(self) -> list[str]:
        return [rec.id for rec in self.all() if self.stop(rec.id)]


def iter_log(path: Path, follow: bool = False, alive: Any = None) -> Iterator[str]:
    """Lines of a log file; with `follow`, keep reading while `alive()` is true."""
    if not path.exists():
        return
    with open(path, errors="replace") as fh:
        while True:
            line = fh.readline()
            if line:
                yield line.rstrip("\n")
            elif follow and alive is not None and alive():
                time.sleep(0.2)
            else:
                return
