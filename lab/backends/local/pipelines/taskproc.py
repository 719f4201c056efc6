"""One pipeline task, one process: how the local backend starts a KFP component.

On a cluster each task is a pod whose container runs the component's command: `sh -c "pip
install ..."`, then `python3 -m kfp.dsl.executor_main --component_module_path ...
--executor_input ... --function_to_execute ...` (the command the kfp SDK compiles for a
lightweight Python component, pinned kfp==2.17.3: kfp/dsl/component_factory.py). Locally the
packages are those of kflab's own environment (nothing is downloaded), so the pip step
becomes a check made before the run (`missing_packages`), and the executor entry point
(`kfp.dsl.executor_main.executor_main`) runs in a child forked from a server that has
imported kfp once: importing kfp costs seconds per process (it imports the Kubernetes
client), which `python3 -m kfp.dsl.executor_main` pays for every task.

Each child is the leader of its own session and process group, tagged with the run's lease
token (KFLAB_RUN), its output written to the task's log file; the caller records it in the
run's lease, so `kflab delete`/`down` stop it like any process kflab starts.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

EXECUTOR_MODULE = "kfp.dsl.executor_main"
PIP_LINE = re.compile(r"-m pip install (.*?)&& \"\$0\" \"\$@\"", re.S)
_lock = threading.Lock()
_ctx: Any = None
# multiprocessing keeps one set of children per process, and every Process.start() polls
# all of them (multiprocessing.process._cleanup). A fork-server child's poll reads its exit
# code from a socket (popen_forkserver.Popen.poll, CPython 3.11-3.13): two threads polling
# one child race, one reads the code and the other meets EOF, which multiprocessing turns
# into exit code 255 -- a task that had finished cleanly then failed, now and then, when
# tasks run side by side. Every start and every poll of a task holds this lock; the waiting
# is done on the task's sentinel, outside it.
_procs_lock = threading.Lock()


@dataclass
class Program:
    """A lightweight Python component's command, taken apart."""

    code: str  # the component's source (the module executor_main imports)
    requirements: list[str]  # packages_to_install, as pip would read them


def parse(command: list[str]) -> Program | None:
    """The component program of a compiled lightweight Python component, or None for any
    other command (a container component, a containerized Python component)."""
    reqs: list[str] = []
    rest = list(command)
    if rest[:2] == ["sh", "-c"] and len(rest) >= 3:
        m = PIP_LINE.search(rest[2])
        if not m:
            return None
        reqs = [t for t in re.findall(r"'([^']*)'", m.group(1)) if not t.startswith("-")]
        rest = rest[3:]
    if len(rest) != 4 or rest[:2] != ["sh", "-ec"] or EXECUTOR_MODULE not in rest[2] \
            or "ephemeral_component.py" not in rest[2]:
        return None
    return Program(code=rest[3], requirements=reqs)


def missing_packages(requirements: list[str]) -> list[str]:
    """The requirements this environment does not satisfy (kfp itself is always the
    installed one: the local backend runs the SDK it compiled with)."""
    if not requirements:  # most tasks: no import of packaging and importlib.metadata
        return []
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import InvalidRequirement, Requirement

    missing = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            missing.append(text)  # a URL or path: nothing local can stand for it
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        if req.name.lower() in ("kfp", "kfp-pipeline-spec"):
            continue
        try:
            have = version(req.name)
        except PackageNotFoundError:
            missing.append(text)
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(f"{text} (installed: {have})")
    return missing


def _context() -> Any:
    """The fork server (started once per kflab process, kfp imported in it)."""
    global _ctx
    with _lock:
        if _ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["lab.backends.local.pipelines._preload", __name__])
            _ctx = ctx
        return _ctx


def import_kfp() -> None:
    """Import kfp for compiling without its API client (kfp/__init__.py skips kfp.client
    when _KFP_RUNTIME is true: seconds of importing the Kubernetes client saved)."""
    if "kfp" in sys.modules:
        return
    saved = os.environ.get("_KFP_RUNTIME")
    os.environ["_KFP_RUNTIME"] = "true"
    try:
        import kfp  # noqa: F401 - its __init__ runs once, here, without kfp.client
    finally:
        if saved is None:
            os.environ.pop("_KFP_RUNTIME", None)
        else:
            os.environ["_KFP_RUNTIME"] = saved
    # kfp.dsl, not kfp.components: that one imports `requests` (for load_component_from_url),
    # a tenth of a second of an all-cached run; a compiled YAML pipeline or a pipeline file
    # that uses it imports it then
    from kfp import dsl  # noqa: F401

    kfp_module = sys.modules["kfp"]
    if "Client" not in vars(kfp_module):  # `from kfp import Client` in a pipeline file
        kfp_module.__getattr__ = _kfp_lazy  # type: ignore[attr-defined]


def _kfp_lazy(name: str) -> Any:
    """kfp.Client and kfp.components, imported when a pipeline file asks for them (PEP 562
    module __getattr__): `import kfp; kfp.components.load_component_from_text(...)` works
    as with a plain `import kfp`."""
    if name == "Client":
        from kfp.client import Client

        return Client
    if name == "components":  # import_module: `from kfp import components` would ask here
        return importlib.import_module("kfp.components")
    raise AttributeError(f"module 'kfp' has no attribute {name!r}")


_warming: list[threading.Thread] = []


def warm_up_async() -> None:
    """warm_up() in the background, once per process."""
    with _lock:
        if _warming:
            return
        thread = threading.Thread(target=warm_up, daemon=True)
        _warming.append(thread)
    thread.start()


def warm_up() -> None:
    """Start the fork server now (in the background of compiling the pipeline)."""
    from multiprocessing import forkserver

    _context()
    with contextlib.suppress(Exception):
        forkserver.ensure_running()


def _child(code: str, args: list[str], env: dict[str, str], log: str, tmp: str,
           cwd: str) -> None:
    """Runs in the forked child: its own session, its log, then kfp's executor."""
    os.setsid()
    # hold nothing of the server's (its listener, the resource tracker's pipe): a task that
    # outlives a killed kflab must not keep kflab's pipes open through them
    os.closerange(3, 65536)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    os.environ["_KFP_RUNTIME"] = "true"
    tempfile.tempdir = None  # TMPDIR of the task, not the server's
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    folder = tempfile.mkdtemp(dir=tmp)
    module = os.path.join(folder, "ephemeral_component.py")
    with open(module, "w") as fh:
        fh.write(code)
    sys.argv = [EXECUTOR_MODULE, "--component_module_path", module, *args]
    from kfp.dsl import executor_main

    executor_main.executor_main()
    sys.stdout.flush()
    sys.stderr.flush()


def start(program: Program, args: list[str], env: dict[str, str], log: str,
          tmp: str) -> Any:
    """Start a task; the returned process has .pid (its group id too); await it with
    exit_code()."""
    proc = _context().Process(target=_child, daemon=False,
                              args=(program.code, args, env, log, tmp, os.getcwd()))
    with _procs_lock:
        proc.start()
    return proc


def exit_code(proc: Any, timeout: float) -> int | None:
    """The task's exit code once it has ended (waiting up to `timeout` seconds), else None.
    Use this, never proc.exitcode or proc.join: see _procs_lock."""
    if not multiprocessing.connection.wait([proc.sentinel], timeout):
        return None
    with _procs_lock:
        return proc.exitcode  # type: ignore[no-any-return]
