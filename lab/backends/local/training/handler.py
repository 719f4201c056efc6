"""Training jobs on the local backend: PyTorchJob and TFJob (kubeflow.org/v1, Training Operator)
and TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer), one supervisor for all.

`apply` validates and defaults the job (kinds.py), plans GPUs (training_env) and runs
the supervisor (training_run) in the foreground, or with wait=False as a background process
(`python -m lab.backends.local.training.handler`) that inherits the job's lease. Whoever
supervises holds the lease (owners.py) and records every replica in it, so `kflab delete` /
`kflab down` from any terminal stop the supervisor and every replica's process group: no
orphan process, no port left bound. `logs` reads the per-replica logs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import signals, state
from lab.backends.local import fidelity, gpus, owners
from lab.backends.local.owners import Lease
from lab.backends.local.procs import iter_log
from lab.backends.local.training import containers
from lab.backends.local.training import status as st
from lab.backends.local.training.env import available_for, plan_gpus
from lab.backends.local.training.kinds import (
    KINDS,
    apply_defaults,
    flavor_for,
    parse,
    replica_type,
)
from lab.backends.local.training.run import Supervisor
from lab.errors import LabError
from lab.state import StateError

# Applying the same job again changes nothing (kubectl: unchanged; a finished Job is not
# run again): no re-run, as for an Experiment. A changed manifest, or delete then apply, runs.
UNCHANGED_IS_NOOP = True

# --- handler API ---------------------------------------------------------------------------

def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    """Everything `apply` refuses (the spec, the GPUs it asks for, an image that needs a
    container engine this machine lacks), with no side effect."""
    job = parse(obj)
    plan_gpus(job, available_for(job))
    engine = containers.engine_for(job, obj)
    if engine is not None:
        containers.preflight(engine, job)


def _prepare(backend: Any, obj: dict[str, Any], base_dir: Path, lease: Lease,
             allocate: bool = True, pulled: bool = False) -> Supervisor:
    """Validate, plan GPUs and ports, pull images; raises before anything is stored or
    started. With `allocate`, the GPUs are taken from the shared allocation (gpus.py),
    waiting Pending while other workloads hold them, as the scheduler keeps a pod Pending.
    `pulled`: the foreground command already pulled the images (a background supervisor)."""
    job = parse(obj)
    available = available_for(job)
    plan = plan_gpus(job, available)
    engine = containers.engine_for(job, obj)
    if engine is not None:
        containers.pull(engine, job, backend.emit, pulled=pulled)
    apply_defaults(obj, job)
    if allocate and any(plan.values()):
        plan = _allocate(backend, obj, job, plan, available, lease)
    meta = obj["metadata"]
    run_dir = backend.store.run_dir(job.kind, meta["name"], meta["namespace"])
    for rep, i in job.ordered():  # a re-applied job starts with fresh replica logs
        state.remove(backend.root, backend.store.run_file(
            job.kind, meta["name"], meta["namespace"], f"{rep.name(i)}.log"))
    sup = Supervisor(backend, obj, job, run_dir, base_dir, lease, engine=engine)
    sup.prepare(plan, gpus.machine_has_gpus())
    return sup


def _allocate(backend: Any, obj: dict[str, Any], job: Any, plan: dict[str, list[str]],
              available: list[str], lease: Lease) -> dict[str, list[str]]:
    meta = obj["metadata"]
    holder = gpus.holder_of(job.kind, meta["namespace"], meta["name"])
    asks = {part: len(ids) for part, ids in plan.items()}

    def pending(message: str) -> None:
        obj["status"] = {}
        job.flavor.mark(job, obj["status"], "Created", job.flavor.created_message(job))
        obj["metadata"].setdefault("annotations", {})[gpus.ANNOTATION] = f"Pending: {message}"
        backend.store.put(obj)
        backend.emit({"event": "message", "text": f"{job.kind} {meta['name']} is waiting "
                      f"for GPUs: {message} (held by: {', '.join(gpus.holders(backend.root))})"})

    got = gpus.acquire(backend.root, holder, asks, available=available, on_pending=pending,
                       token=lease.token, owner=f"{lease.kind}/{lease.namespace}/{lease.name}")
    obj["metadata"].setdefault("annotations", {})[gpus.ANNOTATION] = gpus.describe(got)
    return got


# Container fields a replica process honours (GPUs are read from resources); the rest
# shape a pod on a cluster only.
CONTAINER_LOCAL = {"name", "command", "args", "env", "workingDir", "resources", "ports"}
# ... and those a container of the image honours too
IN_CONTAINER = CONTAINER_LOCAL | {"image", "imagePullPolicy"}


def cluster_fields(obj: dict[str, Any], job: Any, in_container: bool = False) -> list[str]:
    """Fields set in the manifest that only a cluster acts on (announced once)."""
    honoured = IN_CONTAINER if in_container else CONTAINER_LOCAL
    out = [f for f in job.ignored
           if not (in_container and f in ("trainer.image", "trainer.resourcesPerNode"))]
    seen: set[str] = set()
    for pod in job.flavor.pod_templates(obj):
        for key in pod:
            if key != "containers":
                seen.add(key)
        for c in pod.get("containers") or []:
            if isinstance(c, dict):
                seen.update(k for k in c if k not in honoured)
    return out + sorted(seen)


def _created(sup: Supervisor) -> None:
    obj = sup.obj
    obj["status"] = {}
    sup.job.flavor.mark(sup.job, sup.status, "Created", sup.job.flavor.created_message(sup.job))
    if sup.job.ignored:
        obj["metadata"].setdefault("annotations", {})["kflab.dev/ignored-locally"] = \
            ",".join(sup.job.ignored)
    found = sup.job.flavor.differences(sup.job)
    if (fields := cluster_fields(obj, sup.job, sup.engine is not None)) and \
            sup.job.flavor.fidelity_prefix:
        found.append((f"{sup.job.flavor.fidelity_prefix}.cluster-fields",
                      {"fields": ", ".join(fields)}))
    elif fields:  # a kind without rows in fidelity/rules.py yet (TrainJob)
        sup.backend.emit({"event": "message",
                          "text": f"note: ignored here (cluster only): {', '.join(fields)}"})
    if found:
        fidelity.announce(sup.backend, obj, found)
    sup.backend.store.put(obj)


@contextlib.contextmanager
def _releasing(sup: Supervisor) -> Iterator[None]:
    """The job's GPUs are free again once it ends, however it ends."""
    try:
        yield
    finally:
        meta = sup.obj["metadata"]
        with contextlib.suppress(StateError):
            gpus.release(sup.backend.root, gpus.holder_of(sup.job.kind, meta["namespace"],
                                                          meta["name"]))


def supervise(sup: Supervisor) -> dict[str, Any]:
    """Run the job to its end in this process. Ctrl-C, SIGTERM or SIGHUP (`kflab delete` /
    `down` from another process send SIGTERM) stop every replica and mark the job Failed,
    naming the signal and who sent it; the interruption then goes on up."""
    with sup.networked(), sup.group, _releasing(sup):
        try:
            sup.run()
        except KeyboardInterrupt as exc:
            sup.group.stop_all()
            for inst in sup.instances:
                if inst.state in ("running", "restarting", "pending"):
                    inst.state = "stopped"
            why = signals.reason(exc, sup.lease.stop_request())
            sup.job.flavor.finish(sup.status, "Failed",
                                  f"{sup.job.kind} {sup.job.name} was stopped: {why}")
            # Saved before we exit: a deleting kflab waits for our lease, then removes it. A
            # full or read-only folder refuses: the next command marks it (lease free).
            with contextlib.suppress(StateError):
                sup.save()
            raise
    return sup.obj


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          lease: Lease) -> dict:
    sup = _prepare(backend, obj, base_dir, lease, allocate=wait)  # else the supervisor does
    _created(sup)
    if wait:
        return supervise(sup)
    meta = obj["metadata"]
    argv = [sys.executable, "-m", "lab.backends.local.training.handler", "--state",
            str(backend.root), "--kind", sup.job.kind, "--namespace", meta["namespace"],
            "--base-dir", str(base_dir), "--lease-fd", str(lease.fd), meta["name"]]
    log = backend.store.run_file(sup.job.kind, meta["name"], meta["namespace"],
                                 "supervisor.log")
    from lab.backends.local.procs import popen

    with open(log, "ab") as fh:
        proc = popen(argv, stdout=fh, tag=lease.token, pass_fds=[lease.fd])
    lease.hand_over(proc.pid, argv)
    return obj


def delete(backend: Any, obj: dict[str, Any]) -> None:
    """The backend has already stopped the job's owner and its replicas (owners.stop)."""


# --- ownership: what the next command does when the supervisor died ----------------------

def in_progress(obj: dict[str, Any]) -> bool:
    status = obj.get("status")
    return bool(status) and st.finished(status) is None


def abandon(backend: Any, obj: dict[str, Any], why: str, save: bool = True) -> dict:
    status = obj.setdefault("status", {})
    flavor = flavor_for(str(obj.get("kind")))
    flavor.abandon_counts(status)
    flavor.finish(status, "Failed", flavor.abandoned_message(obj["metadata"]["name"], why))
    if save:
        backend.store.put(obj)
    return obj


def replica_names(obj: dict[str, Any]) -> list[str]:
    """The replicas' short names (master-0, worker-1...) in the kind's order."""
    flavor = flavor_for(str(obj.get("kind")))
    if (own := flavor.replica_names(obj)) is not None:
        return own
    specs = (obj.get("spec") or {}).get(flavor.specs_key) or {}
    counts = {replica_type(flavor, k): v for k, v in specs.items() if isinstance(v, dict)}
    return [f"{t.lower()}-{i}" for t in flavor.replica_types if t in counts
            for i in range(int(counts[t].get("replicas", 1)))]


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    meta = obj["metadata"]
    kind = str(obj.get("kind"))
    run_dir = backend.store.run_path(kind, meta["name"], meta["namespace"])
    names = replica_names(obj)
    if replica is not None:
        if replica not in names:
            raise LabError(f"{kind} '{meta['name']}' has no replica '{replica}'",
                           hint=f"use one of: {', '.join(names)}")
        return iter_log(state.path(run_dir, f"{replica}.log"))
    return (f"[{name}] {line}" for name in names
            for line in iter_log(state.path(run_dir, f"{name}.log")))


def _main(argv: list[str] | None = None) -> int:
    """Background supervisor (apply with wait=False):
    `python -m lab.backends.local.training.handler`."""
    from lab.backends.local import LocalBackend

    signals.install()
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--kind", choices=KINDS, default="PyTorchJob")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--base-dir", required=True)
    ap.add_argument("--lease-fd", type=int, required=True)
    ap.add_argument("name")
    args = ap.parse_args(argv)
    backend = LocalBackend(args.state)
    with owners.adopt(backend.root, args.kind, args.namespace, args.name,
                      args.lease_fd) as lease:
        obj = backend.store.get(args.kind, args.name, args.namespace)
        if obj is None:
            return 1
        try:
            sup = _prepare(backend, obj, Path(args.base_dir), lease, pulled=True)
            result = supervise(sup)
        except KeyboardInterrupt as exc:
            return signals.exit_code(exc)
        except LabError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0 if st.finished(result.get("status") or {}) == "Succeeded" else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(_main())
