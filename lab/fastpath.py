"""kflab's start-up fast path: an unchanged, all-cached `kflab pipeline run`, answered before
click, the command tree and the backends are imported.

Such a run is answered from its replay memo by the local backend anyway (its docstring in
lab/backends/local/pipelines/replay.py says why that reports what the engine would), so what
it costs is kflab's own start: click, the CLI modules, the local backend's owners (psutil),
rich's console -- 0.2 s on 16 cores, where the whole fan-out's first run takes 0.6 s. This
module does the same run with the standard library and the memo's own module
(lab/backends/pipeline_memo.py: the same memo, cache and record code the backend uses).

It answers only when the outcome is certain, and returns None -- the normal path, which
then does everything as before -- on anything else:
- a command line other than `[--state DIR] pipeline run FILE` with `--name N`, `--function
  F`, `-p/--param K=V`, `--parallelism N`, `--backend local` (each as its own word, values
  not starting with '-'); `--no-cache`, `--context`, `--help`, `--opt=value` never answer;
- another backend possible: $KFLAB_CONTEXT, $KFLAB_BACKEND other than local, a ./lab.yaml,
  a lab recorded by `kflab up` in the state folder;
- a terminal narrower than a progress line (rich would wrap it); otherwise the lines (the
  run's, then one per task reused from the cache, SKIPPED as KFP shows a cache hit) are
  printed as rich prints them there (its styles on a terminal, plain text to a pipe);
- no memo, or one whose files, folders' import names, environment variables, interpreter,
  $PYTHONPATH, kfp or kflab changed (replay.py's docstring lists what a memo keys on), or a
  cache entry it names gone, damaged or naming another execution;
- anything the backend's ownership rules would act on: the run's lock held by another
  process, a stop request, an earlier owner that recorded processes or whose tagged
  processes are alive, a record that is unreadable or still running; no /proc (the owner
  record's start time and the tagged-process check read it).
Nothing is written before all of that is known; an error while writing (a full disk) also
hands over to the normal path, which applies the run again from the start.

A local run it hands over (a first run, an edited pipeline) gets its task fork server
started here (_prestart), so that the server's start overlaps kflab's own instead of
following it; $KFLAB_NO_PRESTART=1 turns that off (benches compare both, tests calling
answer() in their own process keep it out).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

# Only what Python has loaded at start-up is imported here: every other kflab command comes
# through answer() too, and leaves at parse(). What answering needs is imported after it.

PLURAL = "pipelineruns"  # lab.kube.kinds' plural of PipelineRun (a test holds them equal)
NAMESPACE = "default"
TAG = "KFLAB_RUN"  # lab.backends.local.procs.TAG: the variable marking a run's processes
_VALUED = {"--name": "name", "--function": "function", "--parallelism": "parallelism",
           "--backend": "backend"}


class _Request:
    """What the command line asks for (only the forms this module answers)."""

    def __init__(self) -> None:
        self.state: str | None = None
        self.file: str | None = None
        self.name: str | None = None
        self.function: str | None = None
        self.parallelism: str | None = None
        self.backend: str | None = None
        self.params: list[str] = []


def parse(argv: list[str]) -> _Request | None:
    """The request, or None for any other command line."""
    req = _Request()
    words = list(argv)
    if words[:1] == ["--state"] and len(words) > 1 and not words[1].startswith("-"):
        req.state = words[1]
        words = words[2:]
    if words[:2] != ["pipeline", "run"]:
        return None
    rest = words[2:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word in _VALUED or word in ("-p", "--param"):
            if i + 1 >= len(rest) or rest[i + 1].startswith("-"):
                return None
            value = rest[i + 1]
            if word in _VALUED:
                if getattr(req, _VALUED[word]) is not None:
                    return None  # given twice: click's rules, not ours
                setattr(req, _VALUED[word], value)
            else:
                req.params.append(value)
            i += 2
        elif word.startswith("-") or req.file is not None:
            return None
        else:
            req.file = word
            i += 1
    return req if req.file else None


def _terminal() -> bool:
    """rich's Console.is_terminal for kflab's console (lab.term.console.console(): sys.stdout)."""
    compat = os.environ.get("TTY_COMPATIBLE", "")
    if compat in ("0", "1"):
        return compat == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return sys.stdout.isatty()
    except ValueError:
        return False


class _Console:
    """How rich prints term.progress.Progress's `run-started` line to this stdout: plain when it is
    not a terminal; on one, with the dim and bold styles (the only ones that line has, so
    the colour system does not matter) unless $TERM is dumb, and wrapped past the width
    (then this module does not answer)."""

    def __init__(self) -> None:
        self.terminal = _terminal()
        dumb = os.environ.get("TERM", "").lower() in ("dumb", "unknown")
        self.styled = self.terminal and not dumb
        self.width = 0
        if self.terminal:  # rich's Console.size: $COLUMNS, else the first std stream's
            columns = os.environ.get("COLUMNS", "")
            if columns.isdigit():
                self.width = int(columns)
            elif dumb:
                self.width = 80
            else:
                for fd in (0, 1, 2):
                    try:
                        self.width = os.get_terminal_size(fd)[0]
                        break
                    except (AttributeError, ValueError, OSError):
                        continue
                self.width = self.width or 80

    def line(self, elapsed: float, run: str, tasks: int) -> str | None:
        """The line as printed (newline included); None where rich would wrap it."""
        if self.terminal and len(f"{elapsed:6.1f}s     pipeline run {run}: {tasks} tasks") \
                > self.width:
            return None
        if self.styled:
            return (f"\x1b[2m{elapsed:6.1f}s\x1b[0m     pipeline run \x1b[1m{run}\x1b[0m: "
                    f"{tasks} tasks\n")
        return f"{elapsed:6.1f}s     pipeline run {run}: {tasks} tasks\n"

    def task_line(self, elapsed: float, ev: dict[str, Any]) -> str | None:
        """term.progress.Progress's line for a task reused from the cache, as printed;
        None where rich would wrap it."""
        from lab.backends.pipeline_memo import cached_text

        words = cached_text(ev)
        plain = f"{elapsed:6.1f}s       task {ev['task']} {ev['state']} {words}"
        if self.terminal and len(plain) > self.width:
            return None
        if self.styled:
            return (f"\x1b[2m{elapsed:6.1f}s\x1b[0m       task {ev['task']} {ev['state']} "
                    f"\x1b[2m{words}\x1b[0m\n")
        return plain + "\n"


def _local_backend(req: _Request) -> bool:
    """The local backend is the one the normal path would choose (lab.backends.choose),
    without reading a lab profile or a lab record: their presence alone says no."""
    if req.backend not in (None, "local") or os.environ.get("KFLAB_CONTEXT"):
        return False
    if os.environ.get("KFLAB_BACKEND", "") not in ("", "local"):
        return False
    return not os.path.exists("lab.yaml")


def _start_time(pid: int) -> float | None:
    """psutil.Process(pid).create_time() on Linux: boot time + start ticks / clock rate."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            ticks = float(fh.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith(b"btime"))
        return ticks / os.sysconf("SC_CLK_TCK") + boot
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _tagged(token: str) -> bool | None:
    """Whether a process whose environment carries KFLAB_RUN=token is alive (as
    procs.tagged finds them); None when /proc cannot be read."""
    want = f"{TAG}={token}".encode()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if want in fh.read().split(b"\0"):
                    return True
        except OSError:  # gone, or another user's
            continue
    return False


def _read(path: Path) -> tuple[bool, Any]:
    """(readable, the JSON in it or None when absent)."""
    import json

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return True, None
    except OSError:
        return False, None
    try:
        return True, json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return False, None


def _command_line() -> list[str]:
    """The owner record's argv, as owners._command_line writes it."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name in ("kflab", "__main__.py"):
        argv[0] = "kflab"
    return argv


def answer(argv: list[str]) -> int | None:
    """The exit code when the run was answered here; None: the normal path runs it."""
    t0 = time.monotonic()
    req = parse(argv)
    if req is None or not _local_backend(req):
        return None
    from lab import signals

    signals.install()  # as the normal path does before anything is written
    try:
        code = _answer(req, t0)
        if code is None:
            _prestart(req)
        return code
    except KeyboardInterrupt as exc:  # what the normal path prints (click's Abort branch)
        print(f"stopped: {signals.reason(exc)}", file=sys.stderr)
        return signals.exit_code(exc)
    except BrokenPipeError:  # the reader left: say nothing, as the normal path
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception:  # anything unforeseen: the normal path decides
        return None


def _prestart(req: _Request) -> None:
    """A local run the engine will do (no memo answers it): start its task fork server now,
    so that the server's own start -- an interpreter, then kfp's executor imported -- runs
    beside this process's start (click, the command tree, kfp, the compile) instead of
    after it, when the first task is ready (taskproc.warm_up; measured in
    docs/performance.md, "The first run's start"). Nothing is written; a run that never
    starts a task leaves the idle server to end with this process."""
    if req.file is None or not os.path.isfile(req.file) or \
            os.environ.get("KFLAB_NO_PRESTART"):
        return
    from lab.backends.local.pipelines import taskproc

    taskproc.warm_up()


def _answer(req: _Request, t0: float) -> int | None:
    from lab import state
    from lab.backends import pipeline_memo, shapes
    from lab.kube import names
    from lab.kube.conditions import now

    assert req.file is not None
    if not os.path.isfile(req.file):
        return None
    path = Path(req.file).resolve()
    name = req.name if req.name is not None else names.slug(path.stem, "PipelineRun",
                                                             fallback="pipeline")
    if names.name_problem("PipelineRun", name) is not None:
        return None
    parallelism = None
    if req.parallelism is not None:
        if not req.parallelism.isdigit() or int(req.parallelism) < 1:
            return None
        parallelism = int(req.parallelism)
    state_opt = req.state if req.state is not None else os.environ.get("KFLAB_STATE")
    if state_opt == "":
        return None
    root = state.state_dir(state_opt)
    if any(root.glob("labs/*/lab.json")):
        return None  # `kflab up` recorded a lab: it may be the default backend
    obj = shapes.pipeline_run_manifest(path.name, name,
                                       pipeline_memo.parse_arguments(req.params),
                                       req.function, parallelism=parallelism)
    obj["metadata"]["namespace"] = NAMESPACE  # as the backend's apply sets it
    memo_path = pipeline_memo.memo_for(root, obj, path)
    memo = pipeline_memo.load(memo_path) if memo_path is not None else None
    if memo is None:
        return None
    console = _Console()
    if console.line(0.0, name, len(memo.get("dag") or {})) is None:
        return None  # rich would wrap the line on this terminal
    with _Owner(root, name) as owner:
        if owner.fd < 0 or not owner.quiet():
            return None
        ok, old = _read(state.path(root, "resources", PLURAL, NAMESPACE, f"{name}.json"))
        if not ok or (old is not None and (
                shapes.record_problem(old) is not None
                or (old.get("status") or {}).get("state") not in shapes.FINAL_STATES)):
            return None
        folder = pipeline_memo.cache_folder(root, NAMESPACE,
                                            str(memo.get("pipeline_name") or ""))
        created = now()
        details = pipeline_memo.details(
            memo, lambda key: pipeline_memo.cached(root, state.path(folder, f"{key}.json")),
            pipeline_memo.stamp(),
            lambda key: pipeline_memo.origin(root, state.path(folder, f"{key}.json")))
        if details is None:
            return None
        told = [{"task": node["display_name"], "state": node["state"],
                 **pipeline_memo.cached_event(node)} for node in details if node.get("cached")]
        if any(console.task_line(0.0, ev) is None for ev in told):
            return None  # rich would wrap a task's line on this terminal
        # all known: from here on, what the backend's apply writes, in its order
        owner.save()
        if old is not None:
            pipeline_memo.drop_run_artifacts(root, NAMESPACE,
                                             str(old["status"].get("run_id") or ""))
            state.remove(root, state.path(root, "resources", PLURAL, NAMESPACE,
                                          f"{name}.json"))
            state.remove(root, state.path(root, "runs", PLURAL, NAMESPACE, name))
        run_dir = state.path(root, "runs", PLURAL, NAMESPACE, name)
        run_dir.mkdir(parents=True, exist_ok=True)

        def started(tasks: list[str]) -> None:  # term.progress.Progress's line, as rich prints it
            sys.stdout.write(console.line(time.monotonic() - t0, name, len(tasks)) or "")
            for ev in told:  # each task reused from the cache, one line each
                sys.stdout.write(console.task_line(time.monotonic() - t0, ev) or "")
            sys.stdout.flush()

        def save(record: dict[str, Any]) -> None:  # the store's put
            meta = record["metadata"]
            meta.setdefault("creationTimestamp", now())
            state.write_json(state.path(root, "resources", PLURAL, NAMESPACE,
                                        f"{name}.json"), record)

        pipeline_memo.write_replay(obj, memo, details, store_root=root, run_dir=run_dir,
                                   parallelism=parallelism
                                   or pipeline_memo.default_parallelism(),
                                   created=created, save=save, started=started)
    sys.stdout.write(f"pipelinerun/{name} SUCCEEDED\n")
    sys.stdout.flush()
    return 0


class _Owner:
    """The run's owner lock and record, as lab.backends.local.owners.acquire takes and
    writes them, taken without waiting (held elsewhere: the normal path says who)."""

    def __init__(self, root: Path, name: str) -> None:
        from lab import state

        self.root, self.name = root, name
        base = ("owners", PLURAL, NAMESPACE)
        self.lock_file = state.path(root, *base, f"{name}.lock")
        self.record_file = state.path(root, *base, f"{name}.json")
        self.stop_file = state.path(root, *base, f"{name}.stop")
        self.fd = -1
        self.started: float | None = None
        self.saved = False  # the record written: this process owns the run

    def __enter__(self) -> _Owner:
        from lab import state

        fd = state.try_hold(self.lock_file)
        self.fd = -1 if fd is None else fd
        return self

    def quiet(self) -> bool:
        """Nothing for owners.acquire / Lease.stop_previous to act on: no stop request, an
        earlier owner record that is readable, lists no process, and whose tag no live
        process carries; /proc readable (this owner's start time comes from it)."""
        self.started = _start_time(os.getpid())
        if self.started is None or self.stop_file.exists():
            return False
        ok, previous = _read(self.record_file)
        if not ok or (previous is not None and not isinstance(previous, dict)):
            return False
        if previous is None:
            return True
        if previous.get("procs"):
            return False
        token = previous.get("token")
        return not token or _tagged(str(token)) is False

    def save(self) -> None:
        import uuid

        from lab import hashchain, state
        from lab.backends.shapes import PIPELINE_RUN
        from lab.kube.conditions import now

        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        record: dict[str, Any] = {
            "kind": PIPELINE_RUN, "namespace": NAMESPACE, "name": self.name,
            "pid": os.getpid(), "started": self.started, "argv": _command_line(), "cwd": cwd,
            "since": now(), "token": f"{PLURAL}.{NAMESPACE}.{self.name}.{uuid.uuid4().hex[:12]}",
            "procs": {}}
        # as owners.acquire adds them: the journal's head, and the mark of `kflab solve`
        mark = hashchain.active_anchor(self.root)
        if mark is not None:
            record["journal"] = mark
        if os.environ.get(hashchain.SOLVE_ENV):
            record["solve"] = os.environ[hashchain.SOLVE_ENV][:64]
        state.write_json(self.record_file, record)
        self.saved = True

    def __exit__(self, *exc: object) -> None:
        import contextlib
        import fcntl

        from lab import state

        if self.fd < 0:
            return
        if self.saved:  # a stop request made while it ran (Lease.release)
            with contextlib.suppress(state.StateError):
                state.remove(self.root, self.stop_file)
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = -1
