"""What differs between the Training Operator's job kinds, behind one small interface.

The supervisor (run.py), the handler and the status writer are shared by every kind, as the
operator's common job controller (pkg/controller.v1/common) is shared by its per-framework
reconcilers. A kind supplies what its reconciler supplies there: the replica types and the
default container, port and restart policy (its *_defaults.go), the environment it appends to
each replica's container (pytorch: envvar.go; tensorflow: SetClusterSpec), when the job counts
as succeeded or failed, and the status messages (its UpdateJobStatus).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from lab import limits
from lab.backends.local.procs import LOOPBACK
from lab.backends.local.training import status as st
from lab.backends.local.training.spec import JobSpec, Replica, _err, check_command

Host = Callable[[str], str]


def loopback(name: str) -> str:
    """Local processes reach every replica on the loopback address."""
    return LOOPBACK


class ReplicaState(Protocol):
    """What the rules read of one running replica (run.Instance)."""

    rep: Replica
    index: int
    state: str  # running | restarting | pending | succeeded | failed | stopped
    exit_code: int | None


def counts(job: JobSpec, instances: Sequence[ReplicaState]) -> dict[str, dict[str, int]]:
    """Active/succeeded/failed per replica type, as the operator counts pods."""
    out: dict[str, dict[str, int]] = {}
    for rtype in job.replicas:
        out[rtype] = {"active": 0, "succeeded": 0, "failed": 0}
    for inst in instances:
        c = out[inst.rep.type]
        if inst.state in ("running", "restarting"):
            c["active"] += 1
        elif inst.state in ("succeeded", "failed"):
            c[inst.state] += 1
    return out


class Flavor:
    """A job kind's rules; subclasses set the class attributes and override what differs."""

    kind: str
    specs_key: str  # pytorchReplicaSpecs, tfReplicaSpecs
    replica_types: tuple[str, ...]  # canonical names, in naming (rank) order
    container: str  # the container the operator runs and configures
    port_name: str
    default_port: int
    default_restart: str
    operator_name: str  # the training.kubeflow.org/operator-name label value
    fidelity_prefix: str  # the kind's rule ids in fidelity/rules.py (pytorch.*, tfjob.*)
    missing_hint: str = "add replica specs"
    running_condition = True  # the controller keeps a Running condition
    # A failed job's replicaStatuses stay as the failing reconcile counted them: the
    # Training Operator's ReconcileJobs (pkg/controller.v1/common/job.go) only adds active
    # to succeeded for a job that succeeded and leaves a failed one's counts alone.
    counts_frozen_on_failure = True
    own_parser = False  # True: the kind reads its manifest itself (parse_object)

    # --- the manifest ----------------------------------------------------------------------
    def parse_object(self, obj: dict[str, Any]) -> JobSpec:
        """The whole manifest, for a kind without replica specs (own_parser)."""
        raise NotImplementedError

    def replica_names(self, obj: dict[str, Any]) -> list[str] | None:
        """The stored object's replica names when the kind has no replica specs."""
        return None

    def pod_templates(self, obj: dict[str, Any]) -> list[dict[str, Any]]:
        """The pod specs in the manifest (for the fields only a cluster acts on)."""
        specs = (obj.get("spec") or {}).get(self.specs_key) or {}
        return [((rs or {}).get("template") or {}).get("spec") or {} for rs in specs.values()]

    def parse_spec(self, job: JobSpec, spec: dict[str, Any]) -> JobSpec:
        """Validate the kind's own fields and return the job with them set."""
        return job

    def apply_defaults(self, obj: dict[str, Any], job: JobSpec) -> None:
        """The kind's own defaults in the stored object (after the shared ones)."""

    def check_processes(self, job: JobSpec) -> None:
        if job.total_replicas > limits.MAX_LOCAL_PROCESSES:
            raise _err(f"spec.{self.specs_key}",
                       limits.limit("processes (replicas)", job.total_replicas,
                                    limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"),
                       "lower the replica counts (run bigger jobs on a cluster)")

    # --- the environment -------------------------------------------------------------------
    def listens(self, job: JobSpec) -> bool:
        """Whether the operator's contract makes a replica listen (a rendezvous store, a
        gRPC server): such replicas run in a private network namespace (run.py isolate)."""
        return True

    def local_defaults(self) -> dict[str, str]:
        """Variables set for every replica unless the manifest sets them: kflab's own
        (loopback sockets), not the operator's."""
        return {}

    def ports(self, job: JobSpec, free_port: Any) -> dict[str, int]:
        """Ports chosen per job (free loopback ports), by the names operator_env reads."""
        return {}

    def cluster_ports(self, job: JobSpec) -> dict[str, int]:
        """The operator's own ports, by the same names: what replicas in containers use
        (each has its own address, as a pod has)."""
        return {}

    def hostnames(self, job: JobSpec, rep: Replica, index: int) -> list[str]:
        """The names a replica answers to on a cluster (its headless Service, in each form
        the cluster's DNS resolves): a container replica's network aliases."""
        svc = f"{job.name}-{rep.name(index)}"
        ns = job.namespace
        return [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local"]

    def check_command(self, rep: Replica) -> None:
        """A replica run as a local process needs the manifest's command."""
        check_command(rep)

    def operator_env(self, job: JobSpec, rep: Replica, index: int,
                     ports: Mapping[str, int], host: Host = loopback) -> list[tuple[str, str]]:
        """The variables the operator appends to the container's env, in its order; `host`
        maps each host name the operator writes to the address used (loopback for local
        processes, the name itself in a container network)."""
        raise NotImplementedError

    # --- status (how the kind's controller writes it; shared rules in status.py) ----------
    def mark(self, job: JobSpec, status: dict[str, Any], ctype: str, message: str) -> None:
        """The job entered `ctype` (Created, Running, Restarting)."""
        st.update(status, ctype, message, self.kind)

    def finish(self, status: dict[str, Any], ctype: str, message: str) -> None:
        """The job ended: ctype is Succeeded or Failed."""
        st.finish(status, ctype, message, kind=self.kind)

    def start_status(self, status: dict[str, Any]) -> None:
        status["startTime"] = st.now()

    def record(self, job: JobSpec, status: dict[str, Any],
               instances: Sequence[ReplicaState]) -> None:
        """The replica counts, after every change."""
        status["replicaStatuses"] = st.replica_statuses(job.name, counts(job, instances),
                                                        self.operator_name)
        status["lastReconcileTime"] = st.now()

    def abandon_counts(self, status: dict[str, Any]) -> None:
        """The supervisor died: what was active counts as failed."""
        for entry in (status.get("replicaStatuses") or {}).values():
            if entry.pop("active", 0):
                entry["failed"] = entry.get("failed", 0) + 1

    def backoff_message(self, job: JobSpec) -> str:
        return f"Job {job.name} has failed because it has reached the specified backoff limit"

    def leaders(self, job: JobSpec) -> tuple[str, ...]:
        """Replica types whose running keeps the job's Running condition True."""
        raise NotImplementedError

    def succeeded(self, job: JobSpec, instances: Sequence[ReplicaState]) -> str | None:
        """The Succeeded message once the job has succeeded, else None."""
        raise NotImplementedError

    def created_message(self, job: JobSpec) -> str:
        return f"{self.kind} {job.name} is created."

    def running_message(self, job: JobSpec) -> str:
        raise NotImplementedError

    def failed_message(self, job: JobSpec, rtype: str, failed: int,
                       policy: str) -> str | None:
        """The Failed message when `failed` replicas of `rtype` failed for good (None: the
        job goes on, e.g. a TFJob's dynamic workers)."""
        raise NotImplementedError

    def restarting_message(self, job: JobSpec, rtype: str) -> str:
        """The Restarting message when a replica is re-created (restartPolicy ExitCode)."""
        raise NotImplementedError

    def differences(self, job: JobSpec) -> list[tuple[str, dict[str, str]]]:
        """The kind's DIFFERENT rows of fidelity/rules.py this job runs into (announced)."""
        return []

    def abandoned_message(self, name: str, why: str) -> str:
        return f"{self.kind} {name} has failed because {why}"
