"""A Katib trial whose runSpec is a training job (PyTorchJob, TFJob): every replica runs.

Katib creates the trial's job and the Training Operator runs all its replicas with the
operator's environment (WORLD_SIZE, RANK, MASTER_ADDR... for a PyTorchJob; TF_CONFIG for a
TFJob); the trial ends with the job's Succeeded or Failed condition (Katib's trial
controller reads them: pkg/controller.v1beta1/trial/trial_controller.go
`UpdateTrialStatusCondition` with the job's success/failure conditions), and the metrics
collector is injected into the primary pod only -- for a Kubeflow training job the one
labelled `training.kubeflow.org/job-role: master`
(pkg/apis/controller/experiments/v1beta1/constants.go `DefaultKubeflowJobPrimaryPodLabels`).

So locally the job runs under the training supervisor (training/run.py) in a thread of the
experiment's process, its replicas recorded in the experiment's lease; the Master replica's
output is the trial's log (what the StdOut collector reads) and the other replicas' logs sit
beside it in the trial's folder. The job object is not stored: the trial is what Katib's
users look at, and a stored job without its own owner would look abandoned to the next
command.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

from lab.backends.local.containers.engine import Engine
from lab.backends.local.gpus import machine_has_gpus
from lab.backends.local.procs import ChildGroup
from lab.backends.local.runners import Mount
from lab.backends.local.training import status as job_status
from lab.backends.local.training.env import available_for, plan_gpus
from lab.backends.local.training.kinds import apply_defaults, parse
from lab.backends.local.training.run import Supervisor
from lab.backends.local.tuning.template import JOB_TRIAL_KINDS
from lab.errors import LabError

JOB_KINDS = JOB_TRIAL_KINDS


class _TrialGroup(ChildGroup):
    """The replicas of one trial's job. Their processes carry the experiment's run token
    (so `kflab down` finds them), which every trial shares: ChildGroup's sweep by token
    at the end would stop the other trials' replicas too. This group stops its own
    process groups only; the experiment's own group sweeps by token when it ends."""

    def stop_all(self, grace: float = 3.0) -> None:
        tag, self.tag = self.tag, None
        try:
            super().stop_all(grace)
        finally:
            self.tag = tag


class _Stopped(Exception):
    """The trial was stopped (early stopping, an interrupted experiment)."""


class _TrialSupervisor(Supervisor):
    """The job's supervisor, inside a trial: no stored object, no log events."""

    stopping = False

    def save(self) -> None:
        self.job.flavor.record(self.job, self.status, self.instances)

    def pump(self, final: bool = False) -> None:
        return None  # the replicas' logs are the trial's files, read by the collector

    def start(self, inst: Any) -> None:
        if self.stopping:
            raise _Stopped
        super().start(inst)


def gpu_asks(runspec: dict[str, Any]) -> dict[str, int]:
    """GPUs per replica (master-0: 1, ...) of a trial's job, to take from the shared
    allocation (gpus.py) before it starts, as the scheduler places each pod; an invalid
    job asks for none (its trial fails naming the problem when it starts)."""
    try:
        job = parse(copy.deepcopy(runspec))
    except LabError:
        return {}
    return {rep.name(i): rep.gpus for rep, i in job.ordered() if rep.gpus}


class JobTrial:
    """The trial's process, as the experiment loop sees one: poll(), wait(), stop()."""

    pid = -1  # no process group of its own: stop() ends the replicas

    def __init__(self, backend: Any, runspec: dict[str, Any], trial: str, run_dir: Path,
                 base_dir: Path, lease: Any, primary_log: Path,
                 held: dict[str, list[str]] | None = None, engine: Engine | None = None,
                 primary_mounts: tuple[Mount, ...] = ()) -> None:
        obj = copy.deepcopy(runspec)  # the supervisor annotates it; the trial keeps its own
        job = parse(obj)
        apply_defaults(obj, job)
        if engine is None:  # replicas run as processes: each needs its command
            for rep in job.replicas.values():
                job.flavor.check_command(rep)
        plan = held if held is not None else plan_gpus(job, available_for(job))
        sup = _TrialSupervisor(backend, obj, job, run_dir, base_dir, lease, engine=engine)
        # Replica labels in the experiment's lease carry the trial's name (master-0 of
        # every trial would collide); the lease is shared with the experiment's thread.
        sup.group = _TrialGroup(lease.token,
                               on_start=lambda label, proc, argv=(): lease.add(
                                   f"{trial}/{label}", proc, argv),
                               on_exit=lambda label: lease.drop(f"{trial}/{label}"))
        sup.prepare(plan, machine_has_gpus())
        leaders = job.flavor.leaders(job)
        primary = next((i for i in sup.instances if i.rep.type in leaders), sup.instances[0])
        primary.log = primary_log
        primary.mounts = primary_mounts  # the collector's folder (Katib's primary pod)
        self.sup, self.primary = sup, primary
        self._forget = lambda: [lease.drop(f"{trial}/{label}")
                                for label in list(sup.group.labels.values())]
        self.returncode: int | None = None
        self.detail = ""
        self._thread = threading.Thread(target=self._run, name=f"trial {trial}", daemon=True)

    def begin(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._supervise()
        finally:
            self._forget()  # the replicas are gone: out of the experiment's lease record

    def _supervise(self) -> None:
        sup = self.sup
        try:
            with sup.networked(), sup.group:
                sup.run()
        except _Stopped:
            self.detail = "stopped"
            self.returncode = 137
            return
        except (LabError, OSError) as exc:
            self.detail = str(exc)
            self.returncode = 127
            return
        except Exception as exc:  # a bug must not leave the trial Running for ever
            self.detail = f"the job's supervisor failed: {exc!r}"
            self.returncode = 1
            return
        if job_status.finished(sup.status) == "Succeeded":
            self.returncode = 0
            return
        cond = job_status.get_condition(sup.status, "Failed") or {}
        self.detail = str(cond.get("message") or "the job failed")
        self.returncode = 1

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self._thread.join(timeout)
        return self.returncode

    def stop(self, grace: float = 2.0) -> None:
        """End every replica now (no restart), and wait for the supervisor to notice."""
        self.sup.stopping = True
        self.sup.group.stop_all(grace=grace)
        self._thread.join(timeout=grace + 5.0)
        if self.returncode is None:
            self.returncode = 137
