"""TrainJob's rules (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2.1.0 on JobSet v0.10.1).

A TrainJob names a runtime (runtimes.py); the runtime's `node` replicated Job runs
`numNodes` pods, each one process here, started by the shared supervisor (run.py) as a
PyTorchJob's replicas are, in the same private network namespace. Facts from upstream
(read, not copied):
- env (trainer pkg/runtime/framework/plugins/torch/torch.go, Torch.EnforceMLPolicy): the
  trainer's env is upserted into the runtime container's, then PET_NNODES (numNodes),
  PET_NPROC_PER_NODE, PET_NODE_RANK (the pod's Job completion index), PET_MASTER_ADDR
  (`<job>-node-0-0.<job>`, loopback here) and PET_MASTER_PORT (29500 upstream; a free
  loopback port here). numProcPerNode comes from the TrainJob, else the runtime's policy
  (default "auto"); "cpu", or "auto" without a GPU, becomes the node's CPU count from
  resourcesPerNode (requests, else limits, rounded up; at least 1); "auto" with GPUs stays
  "auto" for torchrun to count the GPUs. Torch.Validate, only when the TrainJob sets
  numProcPerNode, refuses one other than an integer, auto, cpu or gpu, and trainer env
  that sets a PET_ variable above; without numProcPerNode such env is accepted and the
  PET_ values above replace it (EnforceMLPolicy upserts them after the trainer's env).
- the Job (JobSet v0.10.1 webhook, Kubernetes batch/v1 defaults): restartPolicy OnFailure,
  backoffLimit 6, parallelism = completions = numNodes, completion mode Indexed
  (JOB_COMPLETION_INDEX in each pod's env).
- status (trainer pkg/runtime/framework/plugins/jobset/jobset.go, JobSet.Status; JobSet
  pkg/controllers/jobset_controller.go): the TrainJob controller writes no Created or Running
  condition; it copies the JobSet's Completed condition as `Complete` (reason
  AllJobsCompleted, message "jobset completed successfully") and its Failed condition
  (reason FailedJobs, "jobset failed due to one or more job failures (first failed job:
  <job>-node-0)"), and jobsStatus from the JobSet's replicatedJobsStatus: per replicated
  Job, counts of child Jobs ready / succeeded / failed / active / suspended, zeros included.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from lab import limits
from lab.backends.local.training import status as st
from lab.backends.local.training.flavor import Flavor, Host, ReplicaState, loopback
from lab.backends.local.training.runtimes import CLUSTER_RUNTIME, GROUP, SHIPPED, Runtime
from lab.backends.local.training.spec import (
    GPU_RESOURCE,
    JobSpec,
    Replica,
    _env,
    _err,
    _int,
    _list,
    _mapping,
    _short,
)
from lab.kube.trainer import refuse_newer_fields

NODE = "Node"  # the replica type; its instances are node-0, node-1... (the pods' index)
MASTER_PORT = 29500  # constants.ContainerTrainerPort
BACKOFF_LIMIT = 6  # batch/v1 Job default
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                "PET_MASTER_PORT")
COMPLETE_REASON, COMPLETE_MESSAGE = "AllJobsCompleted", "jobset completed successfully"
FAILED_REASON, FAILED_MESSAGE = "FailedJobs", "jobset failed due to one or more job failures"
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m|k|M|G)?$")
# Fields a TrainJob may set that only a cluster acts on (announced, not refused).
CLUSTER_ONLY = ("initializer", "podTemplateOverrides", "labels", "annotations", "managedBy")


def _cpu_count(raw: Any, where: str) -> int:
    """A CPU quantity as a whole number, rounded up (resource.Quantity.Value())."""
    m = _QUANTITY.match(str(raw).strip())
    if m is None:
        raise _err(where, f"{_short(raw)} is not a CPU quantity", 'write cpu: "2" or "500m"')
    value = float(m.group(1)) * {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, None: 1}[m.group(2)]
    return math.ceil(value - 1e-9)


def _whole(raw: Any, where: str) -> int:
    try:
        count = int(str(raw))
    except ValueError:
        count = -1
    if count < 0:
        raise _err(where, f"expected a whole number, got {_short(raw)}", f"{GPU_RESOURCE}: 1")
    return count


def _resources(raw: Any, where: str) -> tuple[int, int, int]:
    """(GPUs for the node as Trainer counts them, nvidia.com/gpu for the allocation, CPUs)."""
    res = _mapping(raw, where)
    requests = _mapping(res.get("requests"), f"{where}.requests")
    lims = _mapping(res.get("limits"), f"{where}.limits")

    def gpu(rl: dict[str, Any], part: str) -> int:  # runtime.numGPU: a name with "gpu"
        for name, q in rl.items():
            if "gpu" in str(name).lower():
                return _whole(q, f"{where}.{part}.{name}")
        return 0

    gpus = gpu(requests, "requests") or gpu(lims, "limits")
    nvidia = _whole(lims.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0)),
                    f"{where}.limits.{GPU_RESOURCE}")
    if "cpu" in requests and _cpu_count(requests["cpu"], f"{where}.requests.cpu"):
        cpus = _cpu_count(requests["cpu"], f"{where}.requests.cpu")
    else:
        cpus = _cpu_count(lims["cpu"], f"{where}.limits.cpu") if "cpu" in lims else 0
    return gpus, nvidia, cpus


def _ignored_resources(raw: Any) -> tuple[str, ...]:
    """The parts of resourcesPerNode a local node does not act on: everything but the GPU
    counts (the node's GPUs) and cpu (numProcPerNode auto), e.g. memory."""
    where = "trainer.resourcesPerNode"
    if not isinstance(raw, dict):
        return ()
    out = [f"{where}.{key}" for key in raw if key not in ("limits", "requests")]
    for part in ("requests", "limits"):
        for name in raw.get(part) or {}:
            if name != "cpu" and "gpu" not in str(name).lower():
                out.append(f"{where}.{part}.{name}")
    return tuple(out)


def resolve_nproc(value: str, gpus: int, cpus: int) -> str:
    """numProcPerNode as Torch.EnforceMLPolicy writes it into PET_NPROC_PER_NODE."""
    if value == "cpu" or (value == "auto" and gpus == 0):
        return str(max(1, cpus))
    return value


def _runtime(spec: dict[str, Any]) -> Runtime:
    where = "spec.runtimeRef"
    ref = _mapping(spec.get("runtimeRef"), where)
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        raise _err(f"{where}.name", "missing",
                   "name a runtime, e.g. runtimeRef: {name: torch-distributed}")
    group = ref.get("apiGroup") or GROUP
    kind = ref.get("kind") or CLUSTER_RUNTIME
    if group != GROUP or kind not in (CLUSTER_RUNTIME, "TrainingRuntime"):
        raise _err(where, f"unsupported runtime: {kind}.{group}",
                   f"use kind {CLUSTER_RUNTIME} (apiGroup {GROUP})")
    known = ", ".join(SHIPPED)
    if kind != CLUSTER_RUNTIME:
        raise _err(f"{where}.kind", "a namespaced TrainingRuntime is not available locally",
                   f"use one of the ClusterTrainingRuntimes kubeflow/manifests ships: {known}")
    runtime = SHIPPED.get(name)
    if runtime is None:
        raise _err(f"{where}.name", f"no ClusterTrainingRuntime {_short(name)} locally",
                   f"use one the manifests ship: {known} (custom runtimes need a cluster)")
    if runtime.refused:
        raise _err(f"{where}.name", f"{name} cannot run on the local backend: "
                   f"{runtime.refused}", "run it on the lab's cluster (`kflab up`), or use "
                   "torch-distributed")
    return runtime


def _command(trainer: dict[str, Any]) -> tuple[str, ...]:
    argv: list[str] = []
    for key in ("command", "args"):
        part = trainer.get(key)
        if part is None:
            continue
        if not isinstance(part, list) or not all(isinstance(a, str | int | float) for a in part):
            raise _err(f"spec.trainer.{key}", "expected a list of strings",
                       f'write {key}: ["torchrun", "train.py"] (one item per argument)')
        argv.extend(str(a) for a in part)
    if "\0" in "".join(argv):
        raise _err("spec.trainer.command", "contains a NUL character",
                   'write command: ["torchrun", "train.py"] (one item per argument)')
    return tuple(argv) if trainer.get("command") is not None else ()


def _container(trainer: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The runtime's `node` container with the trainer's fields upserted (Trainer v2.1.0
    pkg/runtime/framework/plugins/torch: image, command, args, env, resourcesPerNode)."""
    out: dict[str, Any] = {"name": "node", "image": trainer.get("image") or runtime.image}
    for key in ("command", "args", "env"):
        if trainer.get(key) is not None:
            out[key] = trainer[key]
    if isinstance(trainer.get("resourcesPerNode"), dict):
        out["resources"] = trainer["resourcesPerNode"]
    return out


class TrainJobFlavor(Flavor):
    kind = "TrainJob"
    specs_key = "trainer"
    replica_types = (NODE,)
    container = "node"
    port_name, default_port = "node", MASTER_PORT
    default_restart = "OnFailure"
    operator_name = "trainer"
    fidelity_prefix = ""  # no rows in fidelity/rules.py yet: notes are printed directly
    running_condition = False
    own_parser = True
    counts_frozen_on_failure = False  # jobsStatus follows the JobSet (record)

    # --- the manifest ----------------------------------------------------------------------
    def parse_object(self, obj: dict[str, Any]) -> JobSpec:
        meta = obj["metadata"]
        spec = _mapping(obj.get("spec"), "spec")
        refuse_newer_fields(spec, _err)
        runtime = _runtime(spec)
        trainer = _mapping(spec.get("trainer"), "spec.trainer")
        if spec.get("suspend") is True:
            raise _err("spec.suspend", "a suspended TrainJob is not supported locally",
                       "remove suspend (or set it to false)")
        most = (limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES")
        nodes = _int(trainer, "numNodes", "spec.trainer", 1, most) or runtime.num_nodes
        env = _env(trainer, "spec.trainer")
        # Torch.Validate checks reserved env only when the TrainJob sets numProcPerNode
        # (trainer v2.1.0 pkg/runtime/framework/plugins/torch/torch.go:57-59 returns early
        # otherwise; 73-84 refuse); without it the PET_ values are overwritten by
        # EnforceMLPolicy (torch.go:135, UpsertEnvVars after the trainer's env, :128)
        reserved = sorted({name for name, _ in env if name in RESERVED_ENV})
        if reserved and "numProcPerNode" in trainer:
            raise _err("spec.trainer.env", "must not have reserved envs, invalid envs "
                       f"configured: [{' '.join(reserved)}]",
                       "remove them: the Trainer sets them for every node")
        raw_nproc = trainer.get("numProcPerNode", runtime.nproc_per_node or "auto")
        nproc = str(raw_nproc)
        number = isinstance(raw_nproc, int) and not isinstance(raw_nproc, bool) \
            and raw_nproc >= 1
        if not (number or nproc in ("auto", "cpu", "gpu")):
            raise _err("spec.trainer.numProcPerNode",
                       f"must have an int value or [auto cpu gpu], got {_short(raw_nproc)}",
                       "set numProcPerNode: 2 (or auto)")
        gpus, nvidia, cpus = _resources(trainer.get("resourcesPerNode"),
                                        "spec.trainer.resourcesPerNode")
        nproc = resolve_nproc(nproc, gpus, cpus)
        _list(trainer.get("args"), "spec.trainer.args", '["--epochs", "2"]')
        container = _container(trainer, runtime)
        node = Replica(NODE, nodes, self.default_restart, _command(trainer), env, None, nvidia,
                       MASTER_PORT, container.get("image"), "spec.trainer", container)
        ignored = tuple(k for k in CLUSTER_ONLY if spec.get(k)) + \
            (("trainer.image",) if trainer.get("image") else ()) + \
            _ignored_resources(trainer.get("resourcesPerNode"))
        job = JobSpec(meta["name"], meta.get("namespace", "default"), {NODE: node},
                      BACKOFF_LIMIT, None, "All", kind=self.kind, nproc_per_node=nproc,
                      ignored=ignored, runtime=runtime, flavor=self)
        self.check_processes(job)
        return job

    def check_processes(self, job: JobSpec) -> None:
        processes = job.total_replicas * job.nproc_int
        if processes > limits.MAX_LOCAL_PROCESSES:
            raise _err("spec.trainer.numNodes",
                       limits.limit("processes (numNodes x numProcPerNode)", processes,
                                    limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"),
                       "lower numNodes or numProcPerNode (run bigger jobs on a cluster)")

    def apply_defaults(self, obj: dict[str, Any], job: JobSpec) -> None:
        """What the API server defaults (the CRD's kubebuilder defaults)."""
        spec = obj.setdefault("spec", {})
        ref = spec.setdefault("runtimeRef", {})
        ref.setdefault("apiGroup", GROUP)
        ref.setdefault("kind", CLUSTER_RUNTIME)
        spec.setdefault("suspend", False)
        spec.setdefault("managedBy", "trainer.kubeflow.org/trainjob-controller")

    def replica_names(self, obj: dict[str, Any]) -> list[str]:
        trainer = (obj.get("spec") or {}).get("trainer") or {}
        runtime = SHIPPED.get(str(((obj.get("spec") or {}).get("runtimeRef") or {}).get("name")))
        nodes = trainer.get("numNodes") or (runtime.num_nodes if runtime else 1)
        return [f"node-{i}" for i in range(int(nodes))]

    def pod_templates(self, obj: dict[str, Any]) -> list[dict[str, Any]]:
        return []  # a TrainJob has no pod template; trainer.image is in `ignored`

    # --- the environment -------------------------------------------------------------------
    def local_defaults(self) -> dict[str, str]:
        """gloo and NCCL pair their sockets on loopback (as for a PyTorchJob)."""
        from lab.backends.local.training.env import loopback_ifname

        name = loopback_ifname()
        return {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name}

    def ports(self, job: JobSpec, free_port: Any) -> dict[str, int]:
        return {"master": free_port()}

    def cluster_ports(self, job: JobSpec) -> dict[str, int]:
        return {"master": MASTER_PORT}

    def hostnames(self, job: JobSpec, rep: Replica, index: int) -> list[str]:
        """A JobSet pod's hostname `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` and its
        name under the JobSet's headless Service (subdomain `<jobset>`)."""
        pod = f"{job.name}-node-0-{index}"
        return [pod, f"{pod}.{job.name}", f"{pod}.{job.name}.{job.namespace}.svc"]

    def check_command(self, rep: Replica) -> None:
        c = rep.container if isinstance(rep.container, dict) else {}
        if c.get("command") is None:
            raise _err("spec.trainer.command", "missing: the torch-distributed runtime's "
                       "container has no command, so a cluster runs the image's entrypoint, "
                       "which is unknown locally (no image is pulled or run)",
                       'add command: ["torchrun", "train.py"] (torchrun reads the PET_ '
                       "variables)")
        if not rep.command or not rep.command[0].strip():
            raise _err("spec.trainer.command", "empty: no program to run",
                       'write command: ["torchrun", "train.py"] (one item per argument)')

    def operator_env(self, job: JobSpec, rep: Replica, index: int,
                     ports: Mapping[str, int], host: Host = loopback) -> list[tuple[str, str]]:
        return [("JOB_COMPLETION_INDEX", str(index)),  # the Job controller (Indexed)
                ("PET_NNODES", str(rep.replicas)),
                ("PET_NPROC_PER_NODE", str(job.nproc_per_node)),
                ("PET_NODE_RANK", str(index)),
                ("PET_MASTER_ADDR", host(f"{job.name}-node-0-0.{job.name}")),
                ("PET_MASTER_PORT", str(ports["master"]))]

    # --- status ----------------------------------------------------------------------------
    def mark(self, job: JobSpec, status: dict[str, Any], ctype: str, message: str) -> None:
        """The TrainJob controller writes no Created, Running or Restarting condition: the
        JobSet and its Jobs exist from the start, with zero counts."""
        if ctype == "Created":
            status["jobsStatus"] = [_zero(name) for name in job.runtime.replicated_jobs]

    def finish(self, status: dict[str, Any], ctype: str, message: str) -> None:
        ctype, reason = (("Complete", COMPLETE_REASON) if ctype == "Succeeded"
                         else ("Failed", FAILED_REASON))
        conds = status.setdefault("conditions", [])
        if any(c.get("type") == ctype for c in conds):
            return
        conds.append({"type": ctype, "status": "True", "reason": reason, "message": message,
                      "lastTransitionTime": st.now()})

    def start_status(self, status: dict[str, Any]) -> None:
        """No startTime in a TrainJob's status."""

    def record(self, job: JobSpec, status: dict[str, Any],
               instances: Sequence[ReplicaState]) -> None:
        """jobsStatus: the trainer's one Job per replicated Job, as JobSet counts child Jobs."""
        ended = st.finished(status)
        entry = _zero("node")
        if ended == "Succeeded":
            entry["succeeded"] = 1
        elif ended == "Failed":
            entry["failed"] = 1
        else:
            live = [i for i in instances if i.state in ("running", "restarting", "pending")]
            done = sum(1 for i in instances if i.state == "succeeded")
            running = sum(1 for i in instances if i.state == "running")
            entry["active"] = 1 if live else 0
            entry["ready"] = 1 if live and done + running >= job.replicas[NODE].replicas else 0
        status["jobsStatus"] = [entry if name == "node" else _zero(name)
                                for name in job.runtime.replicated_jobs]

    def abandon_counts(self, status: dict[str, Any]) -> None:
        for entry in status.get("jobsStatus") or []:
            if entry.get("active"):
                entry.update(active=0, ready=0, failed=entry.get("failed", 0) + 1)

    def backoff_message(self, job: JobSpec) -> str:
        return f"{FAILED_MESSAGE} (first failed job: {job.name}-node-0)"

    def leaders(self, job: JobSpec) -> tuple[str, ...]:
        return (NODE,)

    def succeeded(self, job: JobSpec, instances: Sequence[ReplicaState]) -> str | None:
        """JobSet's default success policy: every Job done; the Job: every index done."""
        if instances and all(i.state == "succeeded" for i in instances):
            return COMPLETE_MESSAGE
        return None

    def running_message(self, job: JobSpec) -> str:
        return ""

    def failed_message(self, job: JobSpec, rtype: str, failed: int,
                       policy: str) -> str | None:
        return self.backoff_message(job)

    def restarting_message(self, job: JobSpec, rtype: str) -> str:
        return ""

    def abandoned_message(self, name: str, why: str) -> str:
        return f"TrainJob {name} has failed because {why}"


def _zero(name: str) -> dict[str, Any]:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}


FLAVOR = TrainJobFlavor()
