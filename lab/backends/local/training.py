"""PyTorchJob handler of the local backend: replicas as local processes, operator semantics.

`apply` validates and defaults the job (training_spec), plans GPUs and ports, then runs a
supervisor loop in the foreground (or, with wait=False, as a tracked background process):
it starts every replica with the operator's environment (training_env), restarts replicas
by their restartPolicy, enforces backoffLimit / activeDeadlineSeconds / cleanPodPolicy and
writes the status in the operator's shape (training_status) to the store after each change,
so `kflab get` in another terminal sees it live. Per-replica logs are kept in the job's run
folder and streamed with a replica prefix. Ctrl-C, an error or `kflab delete` stops every
replica's process group: no orphan process, no port left bound.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.backends.local import training_status as st
from lab.backends.local.procs import ChildGroup, is_running, iter_log, kill_group, start_ticks
from lab.backends.local.training_env import (
    free_port,
    localize,
    plan_gpus,
    replica_env,
    service_names,
    visible_gpus,
)
from lab.backends.local.training_spec import MASTER, WORKER, JobSpec, Replica, apply_defaults, parse
from lab.errors import LabError
from lab.state import read_json, write_json

KIND = "PyTorchJob"
POLL = 0.1
RESTART_DELAY = (1.0, 10.0)  # kubelet's crash back-off is 10 s doubling to 5 min; shorter here
EXIT_CODE_RECREATE = 1.0  # seconds before a deleted (ExitCode) replica is created again
CLEAN_NONE_GRACE = 10.0  # cleanPodPolicy None: how long a finished job's stragglers may run on


class Stopped(Exception):
    """SIGTERM from `kflab delete` / `kflab down`: stop replicas, write nothing more."""


@dataclass
class Instance:
    """One replica (one pod upstream): its process across restarts."""

    rep: Replica
    index: int
    env: dict[str, str]
    log: Path
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    # running | restarting (in place, still active) | pending (being re-created) |
    # succeeded | failed | stopped
    state: str = "pending"
    restarts: int = 0
    restart_at: float | None = None
    exit_code: int | None = None
    offset: int = 0
    partial: bytes = b""

    @property
    def name(self) -> str:
        return self.rep.name(self.index)


@dataclass
class Supervisor:
    backend: Any
    obj: dict[str, Any]
    job: JobSpec
    run_dir: Path
    base_dir: Path
    group: ChildGroup = field(default_factory=ChildGroup)
    instances: list[Instance] = field(default_factory=list)
    started: float = 0.0
    total_restarts: int = 0

    # --- setup ---------------------------------------------------------------------------
    def prepare(self, gpu_plan: dict[str, list[str]], host_has_gpus: bool) -> None:
        master_port, rdzv_port = free_port(), free_port()
        for rep, i in self.job.ordered():
            env = replica_env(self.job, rep, i, master_port=master_port, rdzv_port=rdzv_port,
                              gpus=gpu_plan.get(rep.name(i)), host_has_gpus=host_has_gpus)
            cwd = self.base_dir / rep.working_dir if rep.working_dir else self.base_dir
            self.instances.append(Instance(rep, i, env, self.run_dir / f"{rep.name(i)}.log", cwd))

    def start(self, inst: Instance) -> None:
        argv = [localize(a, service_names(self.job)) for a in inst.rep.command]
        if inst.restarts:
            with open(inst.log, "ab") as fh:
                fh.write(f"--- kflab: restart {inst.restarts} of {inst.name} ---\n".encode())
        try:
            with open(inst.log, "ab") as fh:
                inst.proc = self.group.start(argv, cwd=inst.cwd, env=inst.env, stdout=fh)
        except OSError as exc:
            raise LabError(f"{inst.name}: cannot run {argv[0]!r}: {exc.strerror}",
                           hint="check the container's command and workingDir") from None
        inst.state, inst.exit_code, inst.restart_at = "running", None, None
        self.record_pids()

    def record_pids(self) -> None:
        pids = {i.name: {"pid": i.proc.pid, "ticks": start_ticks(i.proc.pid)}
                for i in self.instances if i.proc is not None and i.state == "running"}
        write_json(self.run_dir / "replicas.json", pids)

    # --- status --------------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        return self.obj.setdefault("status", {})

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for inst in self.instances:
            c = out.setdefault(inst.rep.type, {"active": 0, "succeeded": 0, "failed": 0})
            if inst.state in ("running", "restarting"):
                c["active"] += 1
            elif inst.state in ("succeeded", "failed"):
                c[inst.state] += 1
        return out

    def save(self) -> None:
        self.status["replicaStatuses"] = st.replica_statuses(self.job.name, self.counts())
        self.status["lastReconcileTime"] = st.now()
        self.backend.store.put(self.obj)

    # --- logs ----------------------------------------------------------------------------
    def pump(self, final: bool = False) -> None:
        """Emit new complete log lines of every replica, prefixed with its name."""
        for inst in self.instances:
            if not inst.log.exists():
                continue
            with open(inst.log, "rb") as fh:
                fh.seek(inst.offset)
                data = fh.read()
            inst.offset += len(data)
            data = inst.partial + data
            lines = data.split(b"\n")
            inst.partial = b"" if final else lines.pop()
            for raw in lines:
                if raw or final is False:
                    self.backend.emit({"event": "log", "replica": inst.name,
                                       "line": raw.decode(errors="replace")})

    # --- the loop ------------------------------------------------------------------------
    def on_exit(self, inst: Instance, code: int) -> str | None:
        """A replica exited: restart it, or settle it; returns a job failure message."""
        inst.exit_code = code
        policy = inst.rep.restart_policy
        restart = (policy == "Always" or (code != 0 and policy == "OnFailure")
                   or (code != 0 and policy == "ExitCode" and code >= 128))
        if not restart:
            inst.state = "succeeded" if code == 0 else "failed"
            if code == 0:
                return None
            failed = self.counts()[inst.rep.type]["failed"]
            return (f"PyTorchJob {self.job.name} is failed because {failed} {inst.rep.type} "
                    f"replica(s) failed." if policy == "Never" else
                    f'job "{self.job.name}" is failing because "{inst.rep.type}" replica(s) '
                    f"failed.")
        limit = self.job.backoff_limit
        # The operator sums the replicas' restart counts and fails the job once the sum
        # reaches backoffLimit (any restart at all when it is 0).
        if limit is not None and self.total_restarts + 1 >= max(limit, 1):
            inst.state = "failed"
            return (f"Job {self.job.name} has failed because it has reached the specified "
                    f"backoff limit")
        self.total_restarts += 1
        inst.restarts += 1
        inst.restart_at = time.monotonic() + self.restart_delay(inst)
        if policy == "ExitCode":
            # The operator deletes the failed pod and creates a new one: the job shows
            # Restarting until the replacement runs.
            inst.state = "pending"
            st.update(self.status, "Restarting",
                      f"PyTorchJob {self.job.name} is restarting because 1 {inst.rep.type} "
                      f"replica(s) failed.")
        else:
            # OnFailure/Always: the kubelet restarts the container in place; the pod stays
            # Running (active), only its restart count grows.
            inst.state = "restarting"
        return None

    @staticmethod
    def restart_delay(inst: Instance) -> float:
        if inst.rep.restart_policy == "ExitCode":
            return EXIT_CODE_RECREATE
        base, cap = RESTART_DELAY
        return float(min(cap, base * 2 ** (inst.restarts - 1)))

    def succeeded(self) -> str | None:
        counts = self.counts()
        if MASTER in self.job.replicas:
            if counts[MASTER]["succeeded"] == self.job.replicas[MASTER].replicas:
                return f"PyTorchJob {self.job.name} is successfully completed."
            return None
        workers = counts.get(WORKER, {})
        if workers.get("succeeded", 0) == self.job.replicas[WORKER].replicas or (
                self.job.elastic is not None and workers.get("succeeded", 0) > 0):
            return f"PyTorchJob {self.job.namespace}/{self.job.name} successfully completed."
        return None

    def leader_running(self) -> bool:
        lead = MASTER if MASTER in self.job.replicas else WORKER
        return any(i.state in ("running", "restarting") for i in self.instances
                   if i.rep.type == lead)

    def run(self) -> None:
        self.started = time.monotonic()
        self.status["startTime"] = st.now()
        for inst in self.instances:
            self.start(inst)
        self.save()
        deadline = self.job.active_deadline
        while True:
            time.sleep(POLL)
            self.pump()
            changed, failure = False, None
            for inst in self.instances:
                if inst.state == "running" and inst.proc is not None:
                    code = inst.proc.poll()
                    if code is not None:
                        code = 128 - code if code < 0 else code  # killed by a signal: 128+N
                        changed = True
                        failure = self.on_exit(inst, code) or failure
                elif inst.state in ("pending", "restarting") and inst.restart_at is not None \
                        and time.monotonic() >= inst.restart_at:
                    self.start(inst)
                    changed = True
            recreating = any(i.state == "pending" for i in self.instances)
            if self.leader_running() and not recreating and not st.finished(self.status):
                cond = st.get_condition(self.status, "Running")
                if cond is None or cond.get("status") != "True":
                    st.update(self.status, "Running", self.running_message())
                    changed = True
            done = None
            if failure:
                done = ("Failed", failure)
            elif (msg := self.succeeded()) is not None:
                done = ("Succeeded", msg)
            elif deadline is not None and time.monotonic() - self.started > deadline:
                done = ("Failed", f"Job {self.job.name} has failed because it was active "
                                  f"longer than specified deadline")
            if done:
                st.finish(self.status, *done)
                self.save()
                self.clean_up(deadline_hit=done[1].endswith("deadline"))
                return
            if changed:
                self.save()

    def running_message(self) -> str:
        if MASTER in self.job.replicas:
            return f"PyTorchJob {self.job.name} is running."
        return f"PyTorchJob {self.job.namespace}/{self.job.name} is running."

    def clean_up(self, deadline_hit: bool) -> None:
        """cleanPodPolicy Running/All (or a passed deadline) stop what still runs now; None
        lets stragglers finish for a while (a local command cannot leave processes behind
        the way a cluster keeps pods)."""
        if self.job.clean_pod_policy == "None" and not deadline_hit:
            end = time.monotonic() + CLEAN_NONE_GRACE
            while time.monotonic() < end and any(
                    i.state == "running" and i.proc is not None and i.proc.poll() is None
                    for i in self.instances):
                time.sleep(POLL)
                self.pump()
        for inst in self.instances:
            if inst.state == "running" and inst.proc is not None:
                code = inst.proc.poll()
                if code is not None:
                    inst.exit_code = code
                    inst.state = "succeeded" if code == 0 else "failed"
        self.group.stop_all()
        for inst in self.instances:
            if inst.state in ("running", "restarting", "pending"):
                inst.state = "stopped"
        self.pump(final=True)
        self.save()
        (self.run_dir / "replicas.json").unlink(missing_ok=True)


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
    """Run the job to its end in this process; Ctrl-C marks it Failed, SIGTERM just stops."""
    write_json(sup.run_dir / "supervisor.json", {"pid": os.getpid(),
                                                 "ticks": start_ticks(os.getpid())})
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: no handler, no SIGTERM path
        previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        with sup.group:
            try:
                sup.run()
            except KeyboardInterrupt:
                sup.group.stop_all()
                for inst in sup.instances:
                    if inst.state in ("running", "restarting", "pending"):
                        inst.state = "stopped"
                st.finish(sup.status, "Failed",
                          f"PyTorchJob {sup.job.name} was stopped: kflab was interrupted "
                          "(Ctrl-C)")
                sup.save()
                raise
    except Stopped:
        return sup.obj  # being deleted: the store entry goes away, write nothing
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
        [sys.executable, "-m", "lab.backends.local.training", "--state", str(backend.root),
         "--namespace", meta["namespace"], "--base-dir", str(base_dir), meta["name"]],
        owner=f"{KIND}/{meta['namespace']}/{meta['name']}", log=sup.run_dir / "supervisor.log")
    return obj


def _proc_id(obj: dict[str, Any]) -> str:
    return f"pytorchjob-{obj['metadata']['namespace']}-{obj['metadata']['name']}"


def _stop_recorded(path: Path) -> None:
    data = read_json(path) or {}
    entries = data.values() if "pid" not in data else [data]
    for rec in entries:
        pid, ticks = rec.get("pid"), rec.get("ticks")
        if pid and pid != os.getpid() and is_running(pid, ticks):
            kill_group(pid) if path.name == "replicas.json" else _term_and_wait(pid, ticks)


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
    _stop_recorded(run_dir / "supervisor.json")
    _stop_recorded(run_dir / "replicas.json")


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
    """Background supervisor (apply with wait=False): `python -m lab.backends.local.training`."""
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
