"""The supervisor of one local training job (PyTorchJob, TFJob): replicas as processes.

It starts every replica with the operator's environment (env.py and the kind's module),
restarts replicas by their restartPolicy, enforces backoffLimit / activeDeadlineSeconds /
cleanPodPolicy -- as the operator's common job controller does for every kind -- and writes
the status in the operator's shape (status.py) to the store after each change,
so `kflab get` in another terminal sees it live. Replica output goes to one log file per
replica (kept until the job is deleted) and is streamed as `log` events with the replica's
name. All replicas live in a ChildGroup recorded in the job's lease (owners.py): whatever
ends the supervisor ends them too, and if the supervisor is killed outright the next kflab
command finds them by their record.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local.containers import workload
from lab.backends.local.containers.engine import Engine
from lab.backends.local.owners import Lease
from lab.backends.local.procs import ChildGroup, free_port
from lab.backends.local.runners import Mount, ProcessRun
from lab.backends.local.training import containers
from lab.backends.local.training import status as st
from lab.backends.local.training.env import localize, replica_env, service_names
from lab.backends.local.training.flavor import counts
from lab.backends.local.training.spec import JobSpec, Replica
from lab.errors import LabError

POLL = 0.1
RESTART_DELAY = (1.0, 10.0)  # kubelet's crash back-off is 10 s doubling to 5 min; shorter here
EXIT_CODE_RECREATE = 1.0  # seconds before a deleted (ExitCode) replica is created again
CLEAN_NONE_GRACE = 10.0  # cleanPodPolicy None: how long a finished job's stragglers may run on
NETWORK_ANNOTATION = "kflab.dev/network"  # "host": the user asks for the host's network
NETNS = Path(__file__).with_name("netns.py")
HOST_NETWORK_WARNING = (
    "warning: this {kind} runs on the host's network ({why}): {listener} listens on ALL "
    "interfaces, so other machines that can reach this one can connect to {port} while the "
    "job runs")
# what a failed download or connection prints (urllib, requests, Keras' get_file, gRPC)
NETWORK_ERRORS = ("Temporary failure in name resolution", "Name or service not known",
                  "Network is unreachable", "URL fetch failure", "nodename nor servname",
                  "No address associated with hostname", "Failed to establish a new connection")
# what listens beyond loopback when a kind's replicas share the host's network
LISTENERS = {
    "PyTorchJob": ("torch's rendezvous store (rank 0's TCPStore)", "MASTER_PORT"),
    "TFJob": ("each replica's TensorFlow gRPC server", "the ports in TF_CONFIG"),
    "TrainJob": ("torchrun's rendezvous store on node 0", "PET_MASTER_PORT"),
}


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
    gpus: tuple[str, ...] = ()  # its GPUs from the ledger (a container is given them)
    mounts: tuple[Mount, ...] = ()  # more folders for its container (a Katib collector's)

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
    lease: Lease
    group: ChildGroup = field(init=False)
    instances: list[Instance] = field(default_factory=list)
    started: float = 0.0
    total_restarts: int = 0
    holder: subprocess.Popen[bytes] | None = None  # the private network namespace, if any
    hinted: bool = False  # the network hint was given (network_hint)
    engine: Engine | None = None  # replicas run in containers of this engine (containers.py)
    network: str | None = None  # the job's container network, once made

    def __post_init__(self) -> None:
        self.group = ChildGroup(self.lease.token, on_start=self.lease.add,
                                on_exit=self.lease.drop)

    # --- setup ---------------------------------------------------------------------------
    def prepare(self, gpu_plan: dict[str, list[str]], host_has_gpus: bool) -> None:
        flavor = self.job.flavor
        if self.engine is not None:  # the pod's env is built per start (in_container)
            for rep, i in self.job.ordered():
                self.instances.append(Instance(
                    rep, i, dict(containers.pod_env(self.job, rep, i)),
                    state.path(self.run_dir, f"{rep.name(i)}.log"), self.base_dir,
                    gpus=tuple(gpu_plan.get(rep.name(i)) or ())))
            return
        ports = flavor.ports(self.job, free_port)
        for rep, i in self.job.ordered():
            env = replica_env(self.job, rep, i, ports=ports,
                              gpus=gpu_plan.get(rep.name(i)), host_has_gpus=host_has_gpus)
            own = dict(rep.env)
            for var, value in flavor.local_defaults().items():  # e.g. gloo/NCCL on loopback
                if var not in own:
                    env[var] = value
            cwd = self.base_dir / rep.working_dir if rep.working_dir else self.base_dir
            log = state.path(self.run_dir, f"{rep.name(i)}.log")
            self.instances.append(Instance(rep, i, env, log, cwd))

    # --- network ---------------------------------------------------------------------------
    def isolate(self) -> None:
        """Give the replicas a network namespace where only loopback exists (netns.py), or
        say plainly why they run on the host's network and what that exposes. Replicas in
        containers get a network of their own instead (several replicas), where each
        answers to its Service's names."""
        annotations = self.obj["metadata"].get("annotations") or {}
        why = None
        if self.engine is not None:
            self.isolate_containers()
            return
        if not self.job.flavor.listens(self.job):
            self.obj["metadata"].setdefault("annotations", {})[NETWORK_ANNOTATION] = \
                "host (one replica: no TF_CONFIG, so no server it is told to start)"
            return
        if annotations.get(NETWORK_ANNOTATION) == "host":
            why = f"the job asks for it with the annotation {NETWORK_ANNOTATION}: host"
        else:
            holder = self.group.start([sys.executable, "-I", "-S", str(NETNS), "hold"],
                                      label="netns", stdout=subprocess.PIPE)
            line = _first_line(holder, timeout=10.0)
            if line == "ready":
                self.holder = holder
                # No resolver is reachable in the namespace, so torch's reverse lookup of each
                # peer (c10d socket.cpp, only to name it in a log line) fails and warns "The
                # hostname of the client socket cannot be retrieved" per connection. Its C++
                # warnings are off there unless the job or the user's environment sets the level.
                for inst in self.instances:
                    inst.env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
                self.obj["metadata"].setdefault("annotations", {})[NETWORK_ANNOTATION] = \
                    "private (replicas see only loopback)"
                return
            why = ("a private network namespace is not available here: "
                   f"{line.removeprefix('unavailable: ') or 'no answer'}")
            self.group.stop_all(grace=0.5)
            self.group.forget(holder)
        listener, port = LISTENERS[self.job.kind]
        text = HOST_NETWORK_WARNING.format(kind=self.job.kind, why=why, listener=listener,
                                           port=port)
        self.obj["metadata"].setdefault("annotations", {})[NETWORK_ANNOTATION] = \
            f"host ({why})"
        self.backend.emit({"event": "message", "text": text})
        for inst in self.instances:
            with open(inst.log, "ab") as fh:
                fh.write(f"--- kflab: {text} ---\n".encode())

    def isolate_containers(self) -> None:
        assert self.engine is not None
        notes = self.obj["metadata"].setdefault("annotations", {})
        if self.job.total_replicas < 2:
            notes[NETWORK_ANNOTATION] = f"container ({self.engine.name}'s default network)"
            return
        meta = self.obj["metadata"]
        self.network = workload.create_network(
            self.engine, self.backend.root, self.lease.token,
            f"{self.job.kind}/{meta['namespace']}/{meta['name']}")
        notes[NETWORK_ANNOTATION] = (f"container network {self.network} (replicas reach each "
                                     "other by their Services' names)")

    @contextlib.contextmanager
    def networked(self) -> Iterator[None]:
        """Remove the job's container network once its replicas are gone (use around the
        replicas' ChildGroup, which stops them first)."""
        try:
            yield
        finally:
            if self.engine is not None and self.network is not None:
                workload.remove_network(self.engine, self.network)
                self.network = None

    def start(self, inst: Instance) -> None:
        if inst.restarts:
            with open(inst.log, "ab") as fh:
                fh.write(f"--- kflab: restart {inst.restarts} of {inst.name} ---\n".encode())
        if self.engine is not None:
            self.start_container(inst)
            return
        argv = [localize(a, service_names(self.job), self.job.namespace)
                for a in inst.rep.command]
        try:
            run = ProcessRun(self.launcher(argv, inst.env, inst.cwd), inst.cwd, inst.env)
            with open(inst.log, "ab") as fh:
                inst.proc = run.start(self.group, inst.name, fh)
        except OSError as exc:
            raise LabError(f"{inst.name}: cannot run {argv[0]!r}: {exc.strerror}",
                           hint="check the container's command and workingDir") from None
        inst.state, inst.exit_code, inst.restart_at = "running", None, None

    def start_container(self, inst: Instance) -> None:
        """The replica as a container of its image (a new container on each restart, as
        the kubelet's, or the operator's new pod)."""
        assert self.engine is not None
        run = containers.replica_run(self.engine, self.job, inst.rep, inst.index,
                                     root=self.backend.root, token=self.lease.token,
                                     base_dir=self.base_dir, network=self.network,
                                     gpus=inst.gpus, mounts=inst.mounts)
        with open(inst.log, "ab") as fh:
            inst.proc = run.start(self.group, inst.name, fh)
        inst.state, inst.exit_code, inst.restart_at = "running", None, None

    def launcher(self, argv: list[str], env: dict[str, str], cwd: Path) -> list[str]:
        """argv as started: inside the job's private network namespace when it has one
        (the command is looked up first, so a missing one is reported as before)."""
        if self.holder is None:
            return argv
        exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
        if exe is None or (os.sep in exe and not (cwd / exe).exists()):
            raise OSError(2, "No such file or directory")
        return [sys.executable, "-I", "-S", str(NETNS), "join", str(self.holder.pid), "--",
                exe, *argv[1:]]

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
            self.group.signal(inst.proc, signal.SIGKILL)  # checked: reaped elsewhere?
        code = inst.proc.wait()
        self.group.forget(inst.proc)
        return 128 - code if code < 0 else code

    # --- status --------------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        return self.obj.setdefault("status", {})

    def counts(self) -> dict[str, dict[str, int]]:
        return counts(self.job, self.instances)

    def save(self) -> None:
        self.job.flavor.record(self.job, self.status, self.instances)
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
        if code != 0:
            self.network_hint(inst)
        if not restart:
            inst.state = "succeeded" if code == 0 else "failed"
            if code == 0:
                return None
            failed = self.counts()[inst.rep.type]["failed"]
            return self.job.flavor.failed_message(self.job, inst.rep.type, failed, policy)
        limit = self.job.backoff_limit
        # The operator sums the replicas' restart counts and fails the job once the sum
        # reaches backoffLimit (any restart at all when it is 0).
        if limit is not None and self.total_restarts + 1 >= max(limit, 1):
            # The operator fails the job in the reconcile that finds the restart count at
            # the limit, without counting the pods again (training-operator v1.9.0
            # pkg/controller.v1/common/job.go ReconcileJobs: the jobExceedsLimit branch
            # writes the status the previous reconcile counted, where this pod was Running,
            # restarting in place): it stays active in replicaStatuses.
            inst.state = "restarting"
            return self.job.flavor.backoff_message(self.job)
        self.total_restarts += 1
        inst.restarts += 1
        inst.restart_at = time.monotonic() + self.restart_delay(inst)
        if policy == "ExitCode":
            # The operator deletes the failed pod and creates a new one: the job shows
            # Restarting until the replacement runs.
            inst.state = "pending"
            self.job.flavor.mark(self.job, self.status, "Restarting",
                                 self.job.flavor.restarting_message(self.job, inst.rep.type))
        else:
            # OnFailure/Always: the kubelet restarts the container in place; the pod stays
            # Running (active), only its restart count grows.
            inst.state = "restarting"
        return None

    def network_hint(self, inst: Instance) -> None:
        """Once per job: a replica in the private network namespace failed and its log shows
        a failed connection or name lookup (a dataset download, typically). A pod would
        have had the network, so say why this one had not, and the two ways out."""
        if self.holder is None or self.hinted:
            return
        try:
            with open(inst.log, "rb") as fh:
                fh.seek(max(0, inst.log.stat().st_size - 16384))
                tail = fh.read().decode(errors="replace")
        except OSError:
            return
        if not any(marker in tail for marker in NETWORK_ERRORS):
            return
        self.hinted = True
        self.backend.emit({"event": "message", "text": (
            f"note: {inst.name} failed on a network error: the replicas of this "
            f"{self.job.kind} run in a private network namespace where only loopback exists "
            "(kflab.dev/network: private), so downloads fail; put the data where the job "
            "reads it beforehand (e.g. ~/.keras/datasets/ for Keras datasets), or annotate "
            "the job kflab.dev/network: host")})

    @staticmethod
    def restart_delay(inst: Instance) -> float:
        if inst.rep.restart_policy == "ExitCode":
            return EXIT_CODE_RECREATE
        base, cap = RESTART_DELAY
        return float(min(cap, base * 2 ** (inst.restarts - 1)))

    def succeeded(self) -> str | None:
        return self.job.flavor.succeeded(self.job, self.instances)

    def leader_running(self) -> bool:
        leads = self.job.flavor.leaders(self.job)
        return any(i.state in ("running", "restarting") for i in self.instances
                   if i.rep.type in leads)

    def run(self) -> None:
        self.isolate()
        self.started = time.monotonic()
        self.job.flavor.start_status(self.status)
        for inst in self.instances:
            self.start(inst)
        # Every replica process now exists: the pods are Running (before a fast one exits).
        self.job.flavor.mark(self.job, self.status, "Running", self.running_message())
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
            if self.job.flavor.running_condition and self.leader_running() \
                    and not recreating and not st.finished(self.status):
                cond = st.get_condition(self.status, "Running")
                if cond is None or cond.get("status") != "True":
                    self.job.flavor.mark(self.job, self.status, "Running",
                                         self.running_message())
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
                self.job.flavor.finish(self.status, *done)
                self.save()
                self.clean_up(deadline_hit=done[1].endswith("deadline"))
                return
            if changed:
                self.save()

    def running_message(self) -> str:
        return self.job.flavor.running_message(self.job)

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
        if succeeded or not self.job.flavor.counts_frozen_on_failure:
            self.save()
        else:  # ReconcileJobs of a finished, failed job changes no count (IsFinished)
            self.backend.store.put(self.obj)


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The first line a child prints, within `timeout` seconds ('' if none)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return ""
    return proc.stdout.readline().decode(errors="replace").strip()
