"""A Training Operator job (PyTorchJob, TFJob, TrainJob) as read: its replicas and run policy,
and the readers of each field the operator's webhook checks, with errors that name the field
and the fix, before anything runs.

What every kind shares (kubeflow.org/v1 ReplicaSpec and RunPolicy): replicas default to 1,
restartPolicy to the kind's default, cleanPodPolicy to None, the job's container (named for
the kind) gives the command, env, workingDir, GPUs and its named port. Reading a whole
manifest, by its kind's rules, is kinds.py's; what differs per kind (replica types,
nprocPerNode and elasticPolicy, successPolicy...) is in the kind's module (pytorch.py,
tensorflow.py, trainjob.py), which reads its own fields with the readers here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from lab import limits
from lab.backends.local import entrypoint
from lab.errors import InputError

RESTART_POLICIES = ("Never", "OnFailure", "ExitCode", "Always")
CLEAN_POD_POLICIES = ("None", "Running", "All")
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
    port: int  # the kind's named container port (pytorchjob-port, tfjob-port)
    image: str | None = None  # the container's image (which runtime runs it: runtime.py)
    where: str = ""  # the container's field path, for messages
    # the container mapping as written (a container engine reads it: image, args,
    # resources...); command above is command + args, empty when the manifest has none
    container: Any = field(default=None, compare=False, hash=False, repr=False)

    def name(self, index: int) -> str:
        """The replica's short name, as `kflab logs --replica` takes it (e.g. worker-1)."""
        return f"{self.type.lower()}-{index}"


@dataclass(frozen=True)
class Elastic:
    """A PyTorchJob's elasticPolicy."""

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
    backoff_limit: int | None
    active_deadline: int | None
    clean_pod_policy: str
    kind: str = "PyTorchJob"
    nproc_per_node: str | None = None  # PyTorchJob
    elastic: Elastic | None = None  # PyTorchJob
    success_policy: str = ""  # TFJob: "" (chief, else worker 0) or AllWorkers
    dynamic_worker: bool = False  # TFJob: enableDynamicWorker
    runtime: Any = None  # TrainJob: its runtime (runtimes.Runtime)
    ignored: tuple[str, ...] = field(default=())  # fields accepted but without local effect
    # the kind's rules (a flavor.Flavor, which reads this module: so typed Any here), set by
    # whoever read the manifest (kinds.parse, or the kind's own parser)
    flavor: Any = field(default=None, compare=False, repr=False)

    @property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.replicas.values())

    @property
    def nproc_int(self) -> int:
        """nprocPerNode as a number; 'auto'/'cpu'/'gpu' count as 1, as the operator does."""
        value = self.nproc_per_node
        return int(value) if value is not None and _DIGITS.match(value) else 1

    def ordered(self) -> list[tuple[Replica, int]]:
        """Every replica instance in the kind's order (Master or Chief first)."""
        return [(self.replicas[t], i) for t in self.flavor.replica_types if t in self.replicas
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


def _container(template: dict[str, Any], where: str, name: str) -> tuple[dict[str, Any], str]:
    spec = _mapping(template.get("spec"), f"{where}.template.spec")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _err(f"{where}.template.spec.containers", "missing",
                   f"add a container named '{name}' with command: [python, train.py]")
    for i, c in enumerate(containers):
        if isinstance(c, dict) and c.get("name") == name:
            return c, f"{where}.template.spec.containers[{i}]"
    raise _err(f"{where}.template.spec.containers", f"no container named '{name}'",
               f"the Training Operator runs the container named '{name}': "
               "rename yours")


def _command(c: dict[str, Any], where: str) -> tuple[str, ...]:
    """command + args, checked for type; empty when there is no command (a container runs
    the image's entrypoint then: check_command says what a process needs)."""
    argv: list[Any] = []
    for key in ("command", "args"):
        part = c.get(key)
        if part is None:
            continue
        if not isinstance(part, list) or not all(isinstance(a, str | int | float) for a in part):
            raise _err(f"{where}.{key}", "expected a list of strings",
                       f'write {key}: ["python", "train.py"] (one item per argument)')
        if "\0" in "".join(str(a) for a in part):
            raise _err(f"{where}.{key}", "contains a NUL character",
                       'write command: ["python", "train.py"] (one item per argument)')
        argv.extend(str(a) for a in part)
    return tuple(argv) if c.get("command") is not None else ()


def check_command(rep: Replica) -> None:
    """A replica that runs as a local process needs a program: the manifest's command."""
    c = rep.container if isinstance(rep.container, dict) else {}
    if c.get("command") is None:
        raise _err(f"{rep.where}.command", entrypoint.problem(c),
                   entrypoint.hint(c, "python", "/path/to/train.py"))
    if not rep.command or not rep.command[0].strip():
        raise _err(f"{rep.where}.command", "empty: no program to run",
                   'write command: ["python", "train.py"] (one item per argument)')


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


def _port(c: dict[str, Any], where: str, port_name: str, default: int) -> int:
    ports = _list(c.get("ports"), f"{where}.ports",
                  f"ports: [{{name: {port_name}, containerPort: {default}}}]")
    for i, p in enumerate(ports):
        if not isinstance(p, dict):
            raise _err(f"{where}.ports[{i}]", "expected {name: ..., containerPort: ...}",
                       f"name: {port_name}, containerPort: {default}")
        port = _int(p, "containerPort", f"{where}.ports[{i}]", 1, (65535, "the TCP port range"))
        if p.get("name") == port_name:
            return default if port is None else port
    return default


def with_fields(job: JobSpec, **changes: Any) -> JobSpec:
    """A copy of `job` with kind-specific fields set (JobSpec is frozen)."""
    return dataclasses.replace(job, **changes)
