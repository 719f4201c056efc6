"""PyTorchJob handler of the local backend (kubeflow.org/v1, Training Operator semantics).

`apply` validates and defaults the job (training_spec), plans GPUs (training_env) and runs
the supervisor (training_run) in the foreground, or with wait=False as a tracked background
process (`python -m lab.backends.local.training.handler`). `delete` stops whichever supervisor runs
the job and every replica's process group, also from another terminal: no orphan process,
no port left bound. `logs` reads the per-replica logs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.local.procs import is_running, iter_log, kill_group, start_ticks
from lab.backends.local.training import status as st
from lab.backends.local.training.env import plan_gpus, visible_gpus
from lab.backends.local.training.run import KIND, Stopped, Supervisor
from lab.backends.local.training.spec import MASTER, WORKER, apply_defaults, parse
from lab.errors import LabError
from lab.state import read_json, write_json

# --- handler API ---------------------------------------------------------------------------

def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped


def _prepare(backend: Any, obj: dict[str, Any], base_dir: Path) -> Supervisor:
    """Validate, plan GPUs and ports; raises before anything is stored or started."""
    job = parse(obj)
    available = visible_gpus()
    plan = plan_gpus(job, available)
    apply_defaults(obj, job)
    meta = obj["metadata"]
    run_dir = backend.store.run_dir(KIND, meta["name"], meta["namespace"])
    for rep, i in job.ordered():  # a re-applied job starts with fresh replica logs
        (run_dir / f"{rep.name(i)}.log").unlink(missing_ok=True)
    sup = Supervisor(backend, obj, job, run_dir, base_dir)
    sup.prepare(plan, bool(available))
    return sup


def _created(sup: Supervisor) -> None:
    obj = sup.obj
    obj["status"] = {}
    st.update(sup.status, "Created", f"PyTorchJob {sup.job.name} is created.")
    if sup.job.ignored:
        obj["metadata"].setdefault("annotations", {})["kflab.dev/ignored-locally"] = \
            ",".join(f"runPolicy.{k}" for k in sup.job.ignored)
    sup.backend.store.put(obj)


def supervise(sup: Supervisor) -> dict[str, Any]:
    """Run the job to its end in this process. Ctrl-C or SIGTERM (`kflab delete`/`down`
    from another process) stop every replica and mark the job Failed with the reason."""
    write_json(sup.run_dir / "supervisor.json", {"pid": os.getpid(),
                                                 "ticks": start_ticks(os.getpid())})
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: no handler, no SIGTERM path
        previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        with sup.group:
            try:
                sup.run()
            except (KeyboardInterrupt, Stopped) as exc:
                sup.group.stop_all()
                for inst in sup.instances:
                    if inst.state in ("running", "restarting", "pending"):
                        inst.state = "stopped"
                why = ("kflab was interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt)
                       else "kflab delete or kflab down stopped it")
                st.finish(sup.status, "Failed", f"PyTorchJob {sup.job.name} was stopped: {why}")
                sup.save()  # before we exit: a deleting kflab waits for us, then removes it
                if isinstance(exc, KeyboardInterrupt):
                    raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        (sup.run_dir / "supervisor.json").unlink(missing_ok=True)
        (sup.run_dir / "replicas.json").unlink(missing_ok=True)
    return sup.obj


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    sup = _prepare(backend, obj, base_dir)
    _created(sup)
    if wait:
        return supervise(sup)
    meta = obj["metadata"]
    backend.procs.spawn(
        _proc_id(obj),
        [sys.executable, "-m", "lab.backends.local.training.handler", "--state", str(backend.root),
         "--namespace", meta["namespace"], "--base-dir", str(base_dir), meta["name"]],
        owner=f"{KIND}/{meta['namespace']}/{meta['name']}", log=sup.run_dir / "supervisor.log")
    return obj


def _proc_id(obj: dict[str, Any]) -> str:
    return f"pytorchjob-{obj['metadata']['namespace']}-{obj['metadata']['name']}"


def _stop_supervisor(path: Path) -> None:
    """SIGTERM the recorded supervisor (it stops its replicas) and wait for it to go."""
    rec = read_json(path) or {}
    pid, ticks = rec.get("pid"), rec.get("ticks")
    if pid and pid != os.getpid() and is_running(pid, ticks):
        _term_and_wait(pid, ticks)


def _stop_replicas(path: Path) -> None:
    """Kill the recorded replica process groups that are still ours and alive."""
    for rec in (read_json(path) or {}).values():
        if is_running(rec["pid"], rec.get("ticks")):
            kill_group(rec["pid"])


def _term_and_wait(pid: int, ticks: int | None, grace: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and is_running(pid, ticks):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if is_running(pid, ticks):
            os.kill(pid, signal.SIGKILL)


def delete(backend: Any, obj: dict[str, Any]) -> None:
    """Stop the job's supervisor (foreground or background) and every replica group."""
    meta = obj["metadata"]
    run_dir = backend.store.run_dir(KIND, meta["name"], meta["namespace"])
    backend.procs.stop(_proc_id(obj))
    _stop_supervisor(run_dir / "supervisor.json")
    _stop_replicas(run_dir / "replicas.json")


def replica_names(obj: dict[str, Any]) -> list[str]:
    specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return [f"{t.lower()}-{i}" for t in (MASTER, WORKER) if t in specs
            for i in range(int(specs[t].get("replicas", 1)))]


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    meta = obj["metadata"]
    run_dir = backend.store.run_dir(KIND, meta["name"], meta["namespace"])
    names = replica_names(obj)
    if replica is not None:
        if replica not in names:
            raise LabError(f"PyTorchJob '{meta['name']}' has no replica '{replica}'",
                           hint=f"use one of: {', '.join(names)}")
        return iter_log(run_dir / f"{replica}.log")
    return (f"[{name}] {line}" for name in names for line in iter_log(run_dir / f"{name}.log"))


def _main(argv: list[str] | None = None) -> int:
    """Background supervisor (apply with wait=False):
    `python -m lab.backends.local.training.handler`."""
    from lab.backends.local import LocalBackend

    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--base-dir", required=True)
    ap.add_argument("name")
    args = ap.parse_args(argv)
    backend = LocalBackend(args.state)
    obj = backend.store.get(KIND, args.name, args.namespace)
    if obj is None:
        return 1
    sup = _prepare(backend, obj, Path(args.base_dir))
    result = supervise(sup)
    return 0 if st.finished(result.get("status") or {}) == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(_main())
