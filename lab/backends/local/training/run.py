"""The supervisor of one local PyTorchJob: replicas as processes, the operator's rules.

It starts every replica with the operator's environment (training_env), restarts replicas
by their restartPolicy, enforces backoffLimit / activeDeadlineSeconds / cleanPodPolicy and
writes the status in the operator's shape (training_status) to the store after each change,
so `kflab get` in another terminal sees it live. Replica output goes to one log file per
replica (kept until the job is deleted) and is streamed as `log` events with the replica's
name. All replicas live in a ChildGroup: whatever ends the supervisor ends them too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.backends.local.procs import ChildGroup, free_port, start_ticks
from lab.backends.local.training import status as st
from lab.backends.local.training.env import (
    localize,
    replica_env,
    service_names,
)
from lab.backends.local.training.spec import MASTER, WORKER, JobSpec, Replica
from lab.errors import LabError
from lab.state import write_json

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

    def reap(self, inst: Instance) -> int | None:
        """The replica's exit code once it has exited (a signal N counts as 128+N, as a
        container's does), after ending whatever it left in its process group -- as a
        container's exit ends all its processes -- and forgetting its (reusable) PID."""
        assert inst.proc is not None
        if inst.proc.returncode is None:
            try:  # exited? look without reaping, so the PID cannot be reused meanwhile
                exited = os.waitid(os.P_PID, inst.proc.pid,
                                   os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                exited = None
            if exited is None and inst.proc.poll() is None:
                return None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(inst.proc.pid, signal.SIGKILL)
        code = inst.proc.wait()
        if inst.proc in self.group.procs:
            self.group.procs.remove(inst.proc)
        return 128 - code if code < 0 else code

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
        # Every replica process now exists: the pods are Running (before a fast one exits).
        st.update(self.status, "Running", self.running_message())
        self.save()
        deadline = self.job.active_deadline
        while True:
            time.sleep(POLL)
            self.pump()
            changed, failure = False, None
            for inst in self.instances:
                if inst.state == "running" and inst.proc is not None:
                    code = self.reap(inst)
                    if code is not None:
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
        the way a cluster keeps pods). As the operator does, replicas still active when the
        job succeeds are counted as succeeded."""
        active = [i for i in self.instances if i.state in ("running", "restarting", "pending")]
        if self.job.clean_pod_policy == "None" and not deadline_hit:
            end = time.monotonic() + CLEAN_NONE_GRACE
            while time.monotonic() < end and any(
                    i.state == "running" and i.proc is not None and i.proc.poll() is None
                    for i in self.instances):
                time.sleep(POLL)
                self.pump()
        self.group.stop_all()
        succeeded = st.finished(self.status) == "Succeeded"
        for inst in active:
            inst.state = "succeeded" if succeeded else "stopped"
        self.pump(final=True)
        self.save()
        (self.run_dir / "replicas.json").unlink(missing_ok=True)
