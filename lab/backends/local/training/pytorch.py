"""PyTorchJob's rules (kubeflow.org/v1): replica types, env contract, success and messages.

Facts from the Training Operator v1.9 (read, not copied):
- defaults (pytorch_defaults.go): replicas 1, restartPolicy OnFailure, container `pytorch`
  with port `pytorchjob-port` 23456, nprocPerNode "auto", elastic min/max replicas from each
  other or from the Worker count; the webhook wants exactly one Master.
- env (pkg/controller.v1/pytorch envvar.go, master.go, elastic.go): every container gets
  PYTHONUNBUFFERED=1; with a Master also MASTER_ADDR/MASTER_PORT (and PET_MASTER_*),
  WORLD_SIZE = replicas x nprocPerNode (non-numeric nprocPerNode counts as 1), RANK =
  PET_NODE_RANK = index (+1 for Workers); PET_NPROC_PER_NODE when nprocPerNode is set;
  PET_NNODES = total replicas, or for elastic jobs "min:max" with PET_RDZV_ENDPOINT/BACKEND/
  ID/CONF, PET_MAX_RESTARTS, PET_STANDALONE.
- status (pytorchjob_controller.go UpdateJobStatus): the Master's success ends the job;
  without a Master, every Worker's (elastic: any Worker's).

Locally the replica service names (`<job>-master-0`) become 127.0.0.1 and ports are free
loopback ports chosen per job, so two jobs never collide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab import limits
from lab.backends.local.training.flavor import Flavor, Host, ReplicaState, counts, loopback
from lab.backends.local.training.spec import (
    _DIGITS,
    Elastic,
    JobSpec,
    Replica,
    _err,
    _int,
    _list,
    _mapping,
    _short,
    with_fields,
)

MASTER, WORKER = "Master", "Worker"


def _elastic(raw: Any, replicas: dict[str, Replica]) -> Elastic:
    where = "spec.elasticPolicy"
    raw = _mapping(raw, where)
    most = (limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES")
    lo, hi = _int(raw, "minReplicas", where, 1, most), _int(raw, "maxReplicas", where, 1, most)
    if lo is None and hi is None and WORKER in replicas:
        lo = hi = replicas[WORKER].replicas
    lo, hi = lo if lo is not None else hi, hi if hi is not None else lo
    if lo is not None and hi is not None and lo > hi:
        raise _err(f"{where}.minReplicas", f"minReplicas {lo} is above maxReplicas {hi}",
                   "make minReplicas <= maxReplicas")
    if WORKER not in replicas:
        raise _err("spec.pytorchReplicaSpecs.Worker", "an elastic job needs Worker replicas",
                   "add a Worker replica spec")
    backend = raw.get("rdzvBackend") or "c10d"
    if backend not in ("c10d", "etcd", "etcd-v2"):
        raise _err(f"{where}.rdzvBackend", f"unknown backend {_short(backend)}", "use c10d")
    conf = tuple((str(i.get("key")), str(i.get("value")))
                 for i in _list(raw.get("rdzvConf"), f"{where}.rdzvConf",
                                "rdzvConf: [{key: timeout, value: '900'}]")
                 if isinstance(i, dict))
    host = raw.get("rdzvHost")
    if host is not None and not isinstance(host, str):
        raise _err(f"{where}.rdzvHost", f"expected a host name, got {_short(host)}",
                   "remove it: locally the rendezvous is on 127.0.0.1")
    return Elastic(lo, hi, backend, host, _int(raw, "rdzvPort", where, 1,
                                               (65535, "the TCP port range")),
                   None if raw.get("rdzvId") is None else str(raw["rdzvId"]), conf,
                   _int(raw, "maxRestarts", where), _int(raw, "nProcPerNode", where, 1, most),
                   bool(raw.get("standalone")))


class PyTorchFlavor(Flavor):
    kind = "PyTorchJob"
    specs_key = "pytorchReplicaSpecs"
    replica_types = (MASTER, WORKER)
    container = "pytorch"
    port_name, default_port = "pytorchjob-port", 23456
    default_restart = "OnFailure"
    operator_name = "pytorchjob-controller"
    fidelity_prefix = "pytorch"  # its rows in fidelity/rules.py
    missing_hint = "add Master (1 replica) and/or Worker replica specs"

    def local_defaults(self) -> dict[str, str]:
        """gloo and NCCL pair their sockets on loopback (lo; lo0 on macOS)."""
        from lab.backends.local.training.env import loopback_ifname

        name = loopback_ifname()
        return {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name}

    def parse_spec(self, job: JobSpec, spec: dict[str, Any]) -> JobSpec:
        replicas = job.replicas
        if MASTER in replicas and replicas[MASTER].replicas != 1:
            raise _err("spec.pytorchReplicaSpecs.Master.replicas",
                       "a PyTorchJob has one Master",
                       "set replicas: 1 (add Workers for more processes)")
        nproc = spec.get("nprocPerNode")
        elastic = (None if spec.get("elasticPolicy") is None
                   else _elastic(spec["elasticPolicy"], replicas))
        if nproc is None and (elastic is None or elastic.nproc_per_node is None):
            nproc = "auto"
        if nproc is not None and not (_DIGITS.match(str(nproc))
                                      or str(nproc) in ("auto", "cpu", "gpu")):
            raise _err("spec.nprocPerNode",
                       f"{_short(nproc)} is not a number, auto, cpu or gpu",
                       'set nprocPerNode: "2" (a string, as in the CRD)')
        return with_fields(job, nproc_per_node=None if nproc is None else str(nproc),
                           elastic=elastic)

    def check_processes(self, job: JobSpec) -> None:
        elastic = job.elastic
        per_node = max(job.nproc_int, (elastic.nproc_per_node or 1) if elastic else 1)
        processes = max(job.total_replicas,
                        (elastic.max_replicas or 0) if elastic else 0) * per_node
        if processes > limits.MAX_LOCAL_PROCESSES:
            raise _err("spec.nprocPerNode" if per_node > 1 else "spec.pytorchReplicaSpecs",
                       limits.limit("processes (replicas x nprocPerNode)", processes,
                                    limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"),
                       "lower the replica counts or nprocPerNode (run bigger jobs on a "
                       "cluster)")

    def apply_defaults(self, obj: dict[str, Any], job: JobSpec) -> None:
        spec = obj["spec"]
        if job.nproc_per_node is not None:
            spec.setdefault("nprocPerNode", job.nproc_per_node)
        if job.elastic is not None and job.elastic.min_replicas is not None:
            ep = spec["elasticPolicy"]
            ep.setdefault("minReplicas", job.elastic.min_replicas)
            ep.setdefault("maxReplicas", job.elastic.max_replicas)

    def ports(self, job: JobSpec, free_port: Any) -> dict[str, int]:
        return {"master": free_port(), "rdzv": free_port()}

    def cluster_ports(self, job: JobSpec) -> dict[str, int]:
        """master.go: the Master's pytorchjob-port; elastic.go: rdzvPort, else the Worker's
        pytorchjob-port."""
        master = job.replicas[MASTER].port if MASTER in job.replicas else self.default_port
        worker = job.replicas[WORKER].port if WORKER in job.replicas else self.default_port
        rdzv = job.elastic.rdzv_port if job.elastic and job.elastic.rdzv_port else worker
        return {"master": master, "rdzv": rdzv}

    def operator_env(self, job: JobSpec, rep: Replica, index: int,
                     ports: Mapping[str, int], host: Host = loopback) -> list[tuple[str, str]]:
        master_port, rdzv_port = ports["master"], ports["rdzv"]
        out = [("PYTHONUNBUFFERED", "1")]
        if MASTER in job.replicas:
            rank = index + 1 if rep.type == WORKER else index
            addr = host(f"{job.name}-master-0")  # master.go genGeneralName
            out += [("MASTER_PORT", str(master_port)), ("PET_MASTER_PORT", str(master_port)),
                    ("MASTER_ADDR", addr), ("PET_MASTER_ADDR", addr),
                    ("WORLD_SIZE", str(job.total_replicas * job.nproc_int)),
                    ("RANK", str(rank)), ("PET_NODE_RANK", str(rank))]
        if job.nproc_per_node is not None:
            out.append(("PET_NPROC_PER_NODE", job.nproc_per_node))
        ep = job.elastic
        if ep is None:
            out.append(("PET_NNODES", str(job.total_replicas)))
            return out
        rdzv_host = ep.rdzv_host or f"{job.name}-worker-0"  # elastic.go
        out += [("PET_RDZV_ENDPOINT", f"{host(rdzv_host)}:{rdzv_port}"),
                ("PET_RDZV_BACKEND", ep.rdzv_backend)]
        if ep.min_replicas is None:
            out.append(("PET_NNODES", str(job.replicas[WORKER].replicas)))
        else:
            out.append(("PET_NNODES", f"{ep.min_replicas}:{ep.max_replicas}"))
        if ep.max_restarts is not None:
            out.append(("PET_MAX_RESTARTS", str(ep.max_restarts)))
        if ep.nproc_per_node is not None:
            out.append(("PET_NPROC_PER_NODE", str(ep.nproc_per_node)))
        if ep.rdzv_id is not None:
            out.append(("PET_RDZV_ID", ep.rdzv_id))
        if ep.rdzv_conf:
            out.append(("PET_RDZV_CONF", ",".join(f"{k}={v}" for k, v in ep.rdzv_conf)))
        if ep.standalone:
            out.append(("PET_STANDALONE", ""))
        return out

    def leaders(self, job: JobSpec) -> tuple[str, ...]:
        return (MASTER,) if MASTER in job.replicas else (WORKER,)

    def succeeded(self, job: JobSpec, instances: Sequence[ReplicaState]) -> str | None:
        c = counts(job, instances)
        if MASTER in job.replicas:
            if c[MASTER]["succeeded"] == job.replicas[MASTER].replicas:
                return f"PyTorchJob {job.name} is successfully completed."
            return None
        workers = c.get(WORKER, {})
        if workers.get("succeeded", 0) == job.replicas[WORKER].replicas or (
                job.elastic is not None and workers.get("succeeded", 0) > 0):
            return f"PyTorchJob {job.namespace}/{job.name} successfully completed."
        return None

    def running_message(self, job: JobSpec) -> str:
        if MASTER in job.replicas:
            return f"PyTorchJob {job.name} is running."
        return f"PyTorchJob {job.namespace}/{job.name} is running."

    def failed_message(self, job: JobSpec, rtype: str, failed: int,
                       policy: str) -> str | None:
        if policy == "Never":
            return f"PyTorchJob {job.name} is failed because {failed} {rtype} replica(s) failed."
        return f'job "{job.name}" is failing because "{rtype}" replica(s) failed.'

    def restarting_message(self, job: JobSpec, rtype: str) -> str:
        return f"PyTorchJob {job.name} is restarting because 1 {rtype} replica(s) failed."


FLAVOR = PyTorchFlavor()
