"""A PyTorchJob manifest, read and defaulted the way the Training Operator's webhook does.

Defaults (kubeflow.org/v1): replicas 1, restartPolicy OnFailure, cleanPodPolicy None,
nprocPerNode "auto", container port `pytorchjob-port` 23456, elastic min/max replicas from
each other or from the Worker count. Errors name the field and the fix, before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lab import limits
from lab.backends.local import entrypoint
from lab.errors import InputError

MASTER, WORKER = "Master", "Worker"
REPLICA_TYPES = (MASTER, WORKER)
RESTART_POLICIES = ("Never", "OnFailure", "ExitCode", "Always")
CLEAN_POD_POLICIES = ("None", "Running", "All")
DEFAULT_CONTAINER, DEFAULT_PORT_NAME, DEFAULT_PORT = "pytorch", "pytorchjob-port", 23456
GPU_RESOURCE = "nvidia.com/gpu"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_DIGITS = re.compile(r"^[0-9]{1,18}$")


@dataclass(frozen=True)
class Replica:
    """One replica type: how many, how to restart, what to run."""

    type: str
    replicas: int
    restart_policy: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    working_dir: str | None
    gpus: int
    port: int  # the `pytorchjob-port` container port (the env contract quotes it)

    def name(self, index: int) -> str:
        """The replica's short name, as `kflab logs --replica` takes it (e.g. worker-1)."""
        return f"{self.type.lower()}-{index}"


@dataclass(frozen=True)
class Elastic:
    min_replicas: int | None
    max_replicas: int | None
    rdzv_backend: str
    rdzv_host: str | None
    rdzv_port: int | None
    rdzv_id: str | None
    rdzv_conf: tuple[tuple[str, str], ...]
    max_restarts: int | None
    nproc_per_node: int | None
    standalone: bool


@dataclass(frozen=True)
class JobSpec:
    name: str
    namespace: str
    replicas: dict[str, Replica]
    nproc_per_node: str | None
    backoff_limit: int | None
    active_deadline: int | None
    clean_pod_policy: str
    elastic: Elastic | None = None
    ignored: tuple[str, ...] = field(default=())  # fields accepted but without local effect

    @property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.replicas.values())

    @property
    def nproc_int(self) -> int:
        """nprocPerNode as a number; 'auto'/'cpu'/'gpu' count as 1, as the operator does."""
        value = self.nproc_per_node
        return int(value) if value is not None and _DIGITS.match(value) else 1

    def ordered(self) -> list[tuple[Replica, int]]:
        """Every replica instance, Master first (rank order)."""
        return [(self.replicas[t], i) for t in REPLICA_TYPES if t in self.replicas
                for i in range(self.replicas[t].replicas)]


def _err(field_path: str, problem: str, hint: str) -> InputError:
    return InputError(None, field_path, problem, hint=hint)


def _int(data: dict[str, Any], key: str, where: str, minimum: int = 0,
         maximum: tuple[int, str] = (limits.INT32_MAX, "INT32_MAX")) -> int | None:
    """An integer field; `maximum` is (limit, its name in lab/limits.py)."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _err(f"{where}.{key}", f"expected an integer >= {minimum}, got {_short(value)}",
                   f"set {key}: {max(minimum, 1)}")
    if value > maximum[0]:
        raise _err(f"{where}.{key}", limits.limit(key, value, *maximum),
                   f"set {key} to at most {maximum[0]}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _list(value: Any, where: str, example: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _err(where, f"expected a list, got {type(value).__name__} ({_short(value)})",
                   f"write it as a list: {example}")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _err(where, f"expected a mapping, got {type(value).__name__}",
                   "indent the fields under it")
    return value


def _container(template: dict[str, Any], where: str) -> tuple[dict[str, Any], str]:
    spec = _mapping(template.get("spec"), f"{where}.template.spec")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _err(f"{where}.template.spec.containers", "missing",
                   f"add a container named '{DEFAULT_CONTAINER}' with command: [python, train.py]")
    for i, c in enumerate(containers):
        if isinstance(c, dict) and c.get("name") == DEFAULT_CONTAINER:
            return c, f"{where}.template.spec.containers[{i}]"
    raise _err(f"{where}.template.spec.containers", f"no container named '{DEFAULT_CONTAINER}'",
               f"the Training Operator runs the container named '{DEFAULT_CONTAINER}': "
               "rename yours")


def _command(c: dict[str, Any], where: str) -> tuple[str, ...]:
    argv: list[Any] = []
    for key in ("command", "args"):
        part = c.get(key)
        if part is None:
            continue
        if not isinstance(part, list) or not all(isinstance(a, str | int | float) for a in part):
            raise _err(f"{where}.{key}", "expected a list of strings",
                       f'write {key}: ["python", "train.py"] (one item per argument)')
        argv.extend(str(a) for a in part)
    if c.get("command") is None:
        raise _err(f"{where}.command", entrypoint.problem(c),
                   entrypoint.hint(c, "python", "/path/to/train.py"))
    return tuple(argv)


def _env(c: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    out = []
    for i, item in enumerate(_list(c.get("env"), f"{where}.env",
                                   "env: [{name: EPOCHS, value: '2'}]")):
        here = f"{where}.env[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _err(here, "expected {name: ..., value: ...}", "give each variable a name")
        if not _ENV_NAME.match(item["name"]):
            raise _err(f"{here}.name", f"'{item['name']}' is not a valid variable name",
                       "use letters, digits, '_', '-' and '.'")
        if "valueFrom" in item:
            raise _err(f"{here}.valueFrom", "not supported on the local backend",
                       "use a literal value: (secrets and field refs need a cluster)")
        value = item.get("value", "")
        out.append((item["name"], "" if value is None else str(value)))
    return tuple(out)


def _gpus(c: dict[str, Any], where: str) -> int:
    res = _mapping(c.get("resources"), f"{where}.resources")
    limits = _mapping(res.get("limits"), f"{where}.resources.limits")
    requests = _mapping(res.get("requests"), f"{where}.resources.requests")
    raw = limits.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0))
    try:
        count = int(str(raw))
    except ValueError:
        count = -1
    if count < 0:
        raise _err(f"{where}.resources.limits.{GPU_RESOURCE}",
                   f"expected a whole number of GPUs, got {_short(raw)}", f"{GPU_RESOURCE}: 1")
    return count


def _port(c: dict[str, Any], where: str) -> int:
    ports = _list(c.get("ports"), f"{where}.ports",
                  f"ports: [{{name: {DEFAULT_PORT_NAME}, containerPort: {DEFAULT_PORT}}}]")
    for i, p in enumerate(ports):
        if not isinstance(p, dict):
            raise _err(f"{where}.ports[{i}]", "expected {name: ..., containerPort: ...}",
                       f"name: {DEFAULT_PORT_NAME}, containerPort: {DEFAULT_PORT}")
        port = _int(p, "containerPort", f"{where}.ports[{i}]", 1, (65535, "the TCP port range"))
        if p.get("name") == DEFAULT_PORT_NAME:
            return DEFAULT_PORT if port is None else port
    return DEFAULT_PORT


def _replica(rtype: str, raw: Any, where: str) -> Replica:
    raw = _mapping(raw, where)
    count = _int(raw, "replicas", where, 0,
                 (limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"))
    policy = raw.get("restartPolicy") or "OnFailure"
    if policy not in RESTART_POLICIES:
        raise _err(f"{where}.restartPolicy", f"unknown restart policy {_short(policy)}",
                   f"use one of {', '.join(RESTART_POLICIES)}")
    c, cwhere = _container(_mapping(raw.get("template"), f"{where}.template"), where)
    wd = c.get("workingDir")
    return Replica(rtype, 1 if count is None else count, policy, _command(c, cwhere),
                   _env(c, cwhere), str(wd) if wd else None, _gpus(c, cwhere),
                   _port(c, cwhere))


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


def _check_service_names(name: str, replicas: dict[str, Replica]) -> None:
    """The operator makes a headless Service `<job>-<type>-<index>` per replica; a Service
    name is a DNS-1035 label of at most 63 characters, so long job names cannot run."""
    for rep in replicas.values():
        longest = f"{name}-{rep.type.lower()}-{max(rep.replicas - 1, 0)}"
        if len(longest) > 63:
            keep = 63 - (len(longest) - len(name))
            raise _err("metadata.name", f"the replica Service '{longest}' would be "
                       f"{len(longest)} characters long; a Service name is at most 63",
                       f"shorten the job's name to at most {max(keep, 1)} characters")


def parse(obj: dict[str, Any]) -> JobSpec:
    """Validate and default a PyTorchJob; raises InputError naming the field."""
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    raw_specs = _mapping(spec.get("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs")
    if not raw_specs:
        raise _err("spec.pytorchReplicaSpecs", "missing",
                   "add Master (1 replica) and/or Worker replica specs")
    replicas: dict[str, Replica] = {}
    for key, raw in raw_specs.items():
        rtype = str(key).capitalize()  # the operator camel-cases 'master'/'worker'
        if rtype not in REPLICA_TYPES:
            raise _err(f"spec.pytorchReplicaSpecs.{key}", "unknown replica type",
                       "use Master and Worker")
        replicas[rtype] = _replica(rtype, raw, f"spec.pytorchReplicaSpecs.{key}")
    if MASTER in replicas and replicas[MASTER].replicas != 1:
        raise _err("spec.pytorchReplicaSpecs.Master.replicas", "a PyTorchJob has one Master",
                   "set replicas: 1 (add Workers for more processes)")
    run = _mapping(spec.get("runPolicy"), "spec.runPolicy")
    clean = run.get("cleanPodPolicy") or "None"
    if clean not in CLEAN_POD_POLICIES:
        raise _err("spec.runPolicy.cleanPodPolicy", f"unknown policy {_short(clean)}",
                   f"use one of {', '.join(CLEAN_POD_POLICIES)}")
    nproc = spec.get("nprocPerNode")
    elastic = (None if spec.get("elasticPolicy") is None
               else _elastic(spec["elasticPolicy"], replicas))
    if nproc is None and (elastic is None or elastic.nproc_per_node is None):
        nproc = "auto"
    if nproc is not None and not (_DIGITS.match(str(nproc))
                                  or str(nproc) in ("auto", "cpu", "gpu")):
        raise _err("spec.nprocPerNode", f"{_short(nproc)} is not a number, auto, cpu or gpu",
                   'set nprocPerNode: "2" (a string, as in the CRD)')
    ignored = tuple(k for k in ("schedulingPolicy", "ttlSecondsAfterFinished", "suspend",
                                "managedBy") if run.get(k) is not None)
    backoff = _int(run, "backoffLimit", "spec.runPolicy")
    _check_service_names(str(meta["name"]), replicas)
    job = JobSpec(meta["name"], meta.get("namespace", "default"), replicas,
                  None if nproc is None else str(nproc), backoff,
                  _int(run, "activeDeadlineSeconds", "spec.runPolicy", 1,
                       (limits.INT64_MAX, "INT64_MAX")), clean, elastic, ignored)
    per_node = max(job.nproc_int, (elastic.nproc_per_node or 1) if elastic else 1)
    processes = max(job.total_replicas, (elastic.max_replicas or 0) if elastic else 0) * per_node
    if processes > limits.MAX_LOCAL_PROCESSES:
        raise _err("spec.nprocPerNode" if per_node > 1 else "spec.pytorchReplicaSpecs",
                   limits.limit("processes (replicas x nprocPerNode)", processes,
                                limits.MAX_LOCAL_PROCESSES, "MAX_LOCAL_PROCESSES"),
                   "lower the replica counts or nprocPerNode (run bigger jobs on a cluster)")
    return job


def apply_defaults(obj: dict[str, Any], job: JobSpec) -> None:
    """Write the webhook's defaults into the stored object, as `kubectl get -o yaml` shows."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", job.clean_pod_policy)
    if job.nproc_per_node is not None:
        spec.setdefault("nprocPerNode", job.nproc_per_node)
    specs = spec["pytorchReplicaSpecs"]
    for key in list(specs):
        rtype = str(key).capitalize()
        specs[rtype] = specs.pop(key)
        specs[rtype].setdefault("replicas", job.replicas[rtype].replicas)
        specs[rtype].setdefault("restartPolicy", job.replicas[rtype].restart_policy)
    if job.elastic is not None:
        ep = spec["elasticPolicy"]
        if job.elastic.min_replicas is not None:
            ep.setdefault("minReplicas", job.elastic.min_replicas)
            ep.setdefault("maxReplicas", job.elastic.max_replicas)
