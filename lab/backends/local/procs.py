"""Local processes kflab starts: foreground children and tracked background servers.

Each child leads its own process group (and session), so stopping it stops everything it
spawned (torch workers, uvicorn workers), and a Ctrl-C or a closed terminal reaches kflab,
never the child directly. Every record names a process by PID *and* creation time (from
psutil), so a recycled PID is never mistaken for ours. Every child also carries
`KFLAB_RUN=<token>` in its environment: descendants that left the group (torchrun starts its
workers in new sessions) are still found, and a child started just before its owner was
killed -- before its record was written -- is found too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from lab import state

LOOPBACK = "127.0.0.1"  # every local server and rendezvous binds here, never elsewhere
TAG = "KFLAB_RUN"  # environment variable marking every process of one run


def free_port() -> int:
    """A TCP port free on the loopback interface right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def start_time(pid: int) -> float | None:
    """When the process started (seconds since the epoch, as psutil reports it)."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None


def is_running(pid: int, started: float | None = None) -> bool:
    """True if PID is alive (not a zombie) and, when given, started at `started`."""
    try:
        proc = psutil.Process(pid)
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        return started is None or abs(proc.create_time() - started) < 0.01
    except (psutil.Error, ValueError):
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes whose process group is `pgid`."""
    out = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


def tagged(token: str) -> list[psutil.Process]:
    """Live processes of this user whose environment carries KFLAB_RUN=token."""
    if not token:
        return []
    me, out = os.getuid(), []
    for proc in psutil.process_iter(["uids"]):
        with contextlib.suppress(psutil.Error, OSError):
            uids = proc.info["uids"]
            if proc.pid == os.getpid() or (me != 0 and uids is not None and uids.real != me):
                continue
            if proc.environ().get(TAG) == token and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_group(pgid: int, sig: int, started: float | None) -> bool:
    """Signal the process group that the process `pgid`, started at `started`, leads or led.

    Safe after that leader exited and was reaped, which a bare killpg is not: the kernel
    keeps a number out of use while any member of its group lives, so if PID `pgid` now
    belongs to a process started at another time, our group has no member left and the
    number leads someone else's group -- a pipeline task, a trial or any program that has
    just called setsid() (numbers come round once pid_max, 32768 on many systems, are
    used). Nothing is sent then. `started=None` (unknown) signals unchecked."""
    if started is not None:
        try:
            if abs(psutil.Process(pgid).create_time() - started) >= 0.01:
                return False  # the number was reused: our group is empty
        except psutil.NoSuchProcess:
            pass  # leader reaped; members may remain (the group keeps the number)
        except (psutil.Error, ValueError):
            return False
    return _signal_group(pgid, sig)


def kill_group(pgid: int, grace: float = 5.0, started: float | None = None) -> None:
    """SIGTERM the group led by `pgid`; once the leader is gone (or after `grace` seconds)
    SIGKILL the group so that no straggler it spawned survives. The leader's start time
    (taken now when not given) keeps the SIGKILL off a group that recycled its number."""
    started = started if started is not None else start_time(pgid)
    signal_group(pgid, signal.SIGTERM, started)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and is_running(pgid, started):
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL, started)


@dataclass
class ProcRecord:
    """One process kflab started, as written in the state folder."""

    label: str
    pid: int
    started: float | None
    argv: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return is_running(self.pid, self.started)

    @classmethod
    def of(cls, label: str, proc: subprocess.Popen[bytes] | int,
           argv: Sequence[str] = ()) -> ProcRecord:
        pid = proc if isinstance(proc, int) else proc.pid
        return cls(label, pid, start_time(pid), [str(a) for a in argv])


def stop_all(records: Iterable[ProcRecord], token: str | None = None,
             grace: float = 5.0, clients: Iterable[Sequence[str]] = ()) -> int:
    """Stop recorded process groups (only those still ours: same PID and start time) and
    every process tagged with `token`: SIGTERM, up to `grace` seconds, then SIGKILL.
    Returns how many processes were found alive."""
    records = list(records)
    groups = [r for r in records if _group_is_ours(r)]
    strays = tagged(token) if token else []
    found = {p.pid for p in strays} | {r.pid for r in groups}
    clients = [*clients, *(r.argv for r in records), *(_cmdline(p) for p in strays)]
    if not found:
        return _sweep_containers(clients)
    for rec in groups:
        signal_group(rec.pid, signal.SIGTERM, rec.started)
    for proc in strays:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (
            any(r.running for r in groups) or any(_alive(p) for p in strays)):
        time.sleep(0.05)
    for rec in groups:  # each leader may have been reaped meanwhile: checked again
        signal_group(rec.pid, signal.SIGKILL, rec.started)
    for proc in [*strays, *(tagged(token) if token else [])]:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return len(found) + _sweep_containers(clients)


def _cmdline(proc: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return proc.cmdline()
    return []


def _sweep_containers(argvs: list[Sequence[str]]) -> int:
    """Containers whose `podman/docker run` client was among the stopped: a container can
    outlive its client, so they are removed by their run label (containers/cleanup.py).
    Nothing is asked of an engine unless such a client was recorded or found."""
    from lab.backends.local.containers import cleanup

    if not any(cleanup.client_of(a) for a in argvs):
        return 0
    return cleanup.sweep(argvs)


def _group_is_ours(rec: ProcRecord) -> bool:
    """Whether the process group led by the recorded process may still hold our processes:
    its leader is the recorded one (alive or a zombie), or the leader is gone but members
    remain. A PID now used by another process (another start time) is never ours."""
    try:
        leader = psutil.Process(rec.pid)
        return rec.started is None or abs(leader.create_time() - rec.started) < 0.01
    except psutil.NoSuchProcess:
        return bool(group_members(rec.pid))
    except psutil.Error:
        return False


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def popen(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = subprocess.STDOUT,
    tag: str | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start argv (never through a shell) as the leader of a new session and process group,
    tagged with KFLAB_RUN=tag."""
    full_env = dict(os.environ if env is None else env)
    if tag:
        full_env[TAG] = tag
    return subprocess.Popen(
        list(argv), cwd=cwd, env=full_env, stdout=stdout, stderr=stderr,
        stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=tuple(pass_fds),
    )


Hook = Callable[[str, subprocess.Popen[bytes], Sequence[str]], None]


class ChildGroup:
    """Foreground children that must not outlive the command (Ctrl-C, errors, exit).

    Use as a context manager: every process started through it is killed with its whole
    process group on the way out, whatever the reason. `on_start(label, proc, argv)` and
    `on_exit(label)` let an owner record each child in the state folder as it starts.
    """

    def __init__(self, tag: str | None = None, on_start: Hook | None = None,
                 on_exit: Callable[[str], None] | None = None) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.labels: dict[int, str] = {}
        self.started: dict[int, float | None] = {}  # pid: start time, taken before reaping
        self.tag, self.on_start, self.on_exit = tag, on_start, on_exit
        self.swept = True  # nothing started since the last stop_all (or ever)
        # pid: called with the exit code once the child is reaped (a container's client
        # that was killed leaves its container: runners.ContainerRun removes it)
        self.reaped: dict[int, Callable[[int | None], None]] = {}

    def start(self, argv: Sequence[str], label: str | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        self.swept = False
        proc = popen(argv, tag=self.tag, **kwargs)
        self.procs.append(proc)
        self.started[proc.pid] = start_time(proc.pid)  # our unreaped child: the real one
        self.labels[proc.pid] = label or f"pid-{proc.pid}"
        if self.on_start is not None:
            self.on_start(self.labels[proc.pid], proc, argv)
        return proc

    def on_reaped(self, proc: subprocess.Popen[bytes],
                  hook: Callable[[int | None], None]) -> None:
        """Call `hook(returncode)` once the child has been reaped (forget or stop_all)."""
        self.reaped[proc.pid] = hook

    def _after(self, proc: subprocess.Popen[bytes]) -> None:
        hook = self.reaped.pop(proc.pid, None)
        if hook is not None:
            hook(proc.returncode)

    def forget(self, proc: subprocess.Popen[bytes]) -> None:
        """A child that has exited and been reaped: drop it (and its record)."""
        self._after(proc)
        if proc in self.procs:
            self.procs.remove(proc)
        label = self.labels.pop(proc.pid, None)
        self.started.pop(proc.pid, None)
        if label is not None and self.on_exit is not None:
            self.on_exit(label)

    def signal(self, proc: subprocess.Popen[bytes], sig: int) -> bool:
        """Signal the child's process group, unless its number now leads another's."""
        return signal_group(proc.pid, sig, self.started.get(proc.pid))

    def stop_all(self, grace: float = 3.0) -> None:
        """TERM every group, wait up to `grace`, then KILL what is left and reap. A child
        reaped by the wait (or before) may have freed its number: `signal` checks."""
        for proc in self.procs:
            self.signal(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            self.signal(proc, signal.SIGKILL)
            proc.wait()
        for proc in self.procs:
            self._after(proc)
        # Descendants that left their group (new sessions), found by the tag: a scan of
        # every process, so not again when nothing was started since the last one (a
        # supervisor stops its group when the job ends, then again on its way out).
        if self.tag and not self.swept:
            stop_all((), self.tag, grace=0.5)
        self.swept = True

    def __enter__(self) -> ChildGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


@dataclass
class Tracked:
    """A background process recorded in the state folder (`<state>/procs/<id>.json`)."""

    id: str
    pid: int
    started: float | None
    argv: list[str]
    log: str
    owner: str  # the resource it runs for, e.g. InferenceService/default/iris
    tag: str = ""

    @property
    def running(self) -> bool:
        return self.pid > 0 and is_running(self.pid, self.started)


class Registry:
    """Background processes that outlive the CLI command (model servers)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, pid_id: str) -> Path:
        return state.path(self.root, "procs", f"{pid_id}.json")

    def spawn(
        self, pid_id: str, argv: Sequence[str], *, owner: str, log: Path,
        cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
        tag: str | None = None,
    ) -> Tracked:
        """Start argv detached, logging to `log`, and record it under `pid_id`; `tag` (from
        new_tag) when argv must name it, as a container's run label does."""
        self.stop(pid_id)
        token = tag or self.new_tag(pid_id)
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            fh = open(log, "ab")  # noqa: SIM115 - handed to the child, closed below
        except OSError as exc:
            raise state.io_error(exc, log) from None
        with fh:
            proc = popen(argv, cwd=cwd, env=env, stdout=fh, tag=token)
        rec = Tracked(pid_id, proc.pid, start_time(proc.pid), list(argv), str(log), owner,
                      token)
        try:
            state.write_json(self._path(pid_id), asdict(rec))
        except BaseException:
            stop_all([ProcRecord("server", proc.pid, rec.started, list(argv))], token,
                     grace=1.0)
            raise
        return rec

    @staticmethod
    def new_tag(pid_id: str) -> str:
        return f"{pid_id}-{os.urandom(6).hex()}"

    def get(self, pid_id: str) -> Tracked | None:
        return _tracked(state.read_json(self._path(pid_id), fix="apply the resource again"),
                        pid_id)

    def all(self) -> list[Tracked]:
        out = []
        base = state.path(self.root, "procs")
        for file in sorted(base.glob("*.json")):
            if file.name.startswith("."):
                continue
            rec = _tracked(state.read_json(state.confine(self.root, file),
                                           fix="apply the resource again"), file.stem)
            if rec is not None:
                out.append(rec)
        return out

    def stop(self, pid_id: str, grace: float = 5.0) -> bool:
        """Stop the process (and its group) if it is ours and alive; forget it either way."""
        rec = self.get(pid_id)
        if rec is None:
            return False
        stop_all([ProcRecord(rec.id, rec.pid, rec.started, rec.argv)] if rec.pid > 0 else [],
                 rec.tag, grace, clients=[rec.argv] if rec.pid <= 0 else [])
        state.remove(self.root, self._path(pid_id))
        return True

    def stop_all(self) -> list[str]:
        stopped = []
        for file in sorted(state.path(self.root, "procs").glob("*.json")):
            with contextlib.suppress(state.StateError):  # a stray file's odd name
                if not file.name.startswith(".") and self.stop(file.stem):
                    stopped.append(file.stem)
        return stopped

    def rename(self, pid_id: str, new_id: str) -> Tracked | None:
        """Record a running process under another id (a rolled-out server becomes the
        serving one); whatever was recorded under `new_id` is stopped first."""
        rec = self.get(pid_id)
        if rec is None:
            return None
        self.stop(new_id)
        rec.id = new_id
        state.write_json(self._path(new_id), asdict(rec))
        state.remove(self.root, self._path(pid_id))
        return rec


def _tracked(data: dict[str, Any] | None, pid_id: str = "") -> Tracked | None:
    """A process record as written by `spawn`, read defensively: the file is valid JSON
    but its fields may have any type (edited, or written by another version). A field of
    the wrong type is dropped; a PID that cannot be verified (not a positive integer with
    a numeric start time) is never signalled -- only processes carrying the record's tag
    are stopped -- so a bad record can neither crash a command nor stop a stranger."""
    if not data:
        return None

    def text(key: str, default: str = "") -> str:
        value = data.get(key)
        return value if isinstance(value, str) else default

    pid, started = data.get("pid"), data.get("started")
    trusted = (type(pid) is int and pid > 0 and isinstance(started, int | float)
               and not isinstance(started, bool))
    argv = data.get("argv")
    return Tracked(text("id", pid_id), pid if trusted else 0,
                   float(started) if trusted else None,
                   [str(a) for a in argv] if isinstance(argv, list) else [],
                   text("log"), text("owner"), text("tag"))


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
