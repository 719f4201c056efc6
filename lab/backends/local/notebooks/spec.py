"""A Kubeflow Notebook (kubeflow.org/v1) read for the local backend: what runs, what is kept.

The Notebook controller (kubeflow/kubeflow components/notebook-controller, v1.10
notebook_controller.go generateStatefulSet) runs `spec.template.spec` as a one-replica
StatefulSet; the first container is the notebook server, gets NB_PREFIX=/notebook/NS/NAME
and serves on its first port (8888 by default) behind a Service on port 80. Locally the
server is JupyterLab from this installation, started in the manifest's folder: the fields
below that it can honour are honoured (CPU limit as the number of CPUs the server and its
kernels may run on, GPUs as CUDA_VISIBLE_DEVICES, literal env values); the others are listed,
never silently dropped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from lab.errors import InputError

GPU_RESOURCE = "nvidia.com/gpu"
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SUFFIX = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6),
           "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
           "E": Decimal(10**18), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
           "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
           "Ei": Decimal(2**60)}
# Pod and container fields that need a cluster (scheduling, images, storage, identity).
POD_IGNORED = ("volumes", "tolerations", "affinity", "nodeSelector", "serviceAccountName",
               "securityContext", "initContainers", "imagePullSecrets", "runtimeClassName",
               "priorityClassName")
CONTAINER_IGNORED = ("image", "imagePullPolicy", "command", "args", "workingDir", "ports",
                     "volumeMounts", "livenessProbe", "readinessProbe", "startupProbe",
                     "securityContext", "envFrom", "lifecycle")


@dataclass(frozen=True)
class NotebookSpec:
    name: str
    namespace: str
    container: str  # the first container's name (the controller mirrors its state)
    env: tuple[tuple[str, str], ...]
    image: str
    cpu_limit: str | None  # as written
    cpus: int | None  # CPUs the server may run on (the limit, rounded up), None: all
    gpus: int
    memory_limit: int | None  # bytes; listed, not enforced locally
    ignored: tuple[str, ...] = field(default=())

    @property
    def prefix(self) -> str:
        """NB_PREFIX, the URL path the controller gives the server."""
        return f"/notebook/{self.namespace}/{self.name}"


def _err(path: str, problem: str, hint: str) -> InputError:
    return InputError(None, path, problem, hint=hint)


def quantity(value: Any, path: str) -> Decimal:
    """A Kubernetes quantity ("500m", "2", "1Gi") as a number; refuses anything else."""
    text = str(value).strip() if isinstance(value, str | int | float) and \
        not isinstance(value, bool) else ""
    m = _QUANTITY.match(text)
    if not m:
        raise _err(path, f"{value!r} is not a Kubernetes quantity",
                   'write e.g. cpu: "500m" or "2", memory: "1Gi"')
    try:
        return Decimal(m.group(1)) * _SUFFIX.get(m.group(2) or "", Decimal(1))
    except InvalidOperation:
        raise _err(path, f"{value!r} is not a number", 'write e.g. "2"') from None


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _err(path, f"expected a mapping, got {type(value).__name__}",
                   "indent the fields under it")
    return value


def _resources(c: dict[str, Any], where: str) -> tuple[int | None, int, int | None]:
    res = _mapping(c.get("resources"), f"{where}.resources")
    limits = _mapping(res.get("limits"), f"{where}.resources.limits")
    requests = _mapping(res.get("requests"), f"{where}.resources.requests")
    for part, values in (("limits", limits), ("requests", requests)):
        for key, value in values.items():
            if key in ("cpu", "memory"):
                quantity(value, f"{where}.resources.{part}.{key}")
    cpus = None
    if "cpu" in limits:
        cpu = quantity(limits["cpu"], f"{where}.resources.limits.cpu")
        if cpu <= 0:
            raise _err(f"{where}.resources.limits.cpu", "must be more than 0",
                       'write e.g. cpu: "1"')
        cpus = max(1, math.ceil(cpu))
    memory = (int(quantity(limits["memory"], f"{where}.resources.limits.memory"))
              if "memory" in limits else None)
    raw = limits.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0))
    try:
        gpus = int(str(raw))
    except ValueError:
        gpus = -1
    if gpus < 0:
        raise _err(f"{where}.resources.limits.{GPU_RESOURCE}",
                   f"expected a whole number of GPUs, got {raw!r}", f"{GPU_RESOURCE}: 1")
    return cpus, gpus, memory


def parse(obj: dict[str, Any]) -> NotebookSpec:
    """Validate a Notebook; raises InputError naming the field and the fix."""
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    template = _mapping(spec.get("template"), "spec.template")
    pod = _mapping(template.get("spec"), "spec.template.spec")
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _err("spec.template.spec.containers", "missing (at least one container)",
                   f"add a container: [{{name: {meta['name']}, image: ...}}]")
    first = containers[0]
    where = "spec.template.spec.containers[0]"
    if not isinstance(first, dict) or not isinstance(first.get("name"), str) \
            or not first["name"]:
        raise _err(f"{where}.name", "missing", f"name the container, e.g. {meta['name']}")
    if not first.get("image"):
        raise _err(f"{where}.image", "missing (the Notebook CRD requires it)",
                   "give the notebook image, e.g. "
                   "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0")
    cpus, gpus, memory = _resources(first, where)
    env, ignored = [], []
    raw_env = first.get("env") or []
    if not isinstance(raw_env, list):
        raise _err(f"{where}.env", "expected a list", "env: [{name: X, value: '1'}]")
    for i, item in enumerate(raw_env):
        here = f"{where}.env[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not _ENV_NAME.match(item["name"]):
            raise _err(here, "expected {name: VALID_NAME, value: ...}",
                       "use letters, digits, '_', '-' and '.' in the name")
        if "valueFrom" in item:
            ignored.append(f"{here}.valueFrom")
            continue
        value = item.get("value", "")
        env.append((item["name"], "" if value is None else str(value)))
    ignored += [f"spec.template.spec.{k}" for k in POD_IGNORED if pod.get(k) not in
                (None, {}, [])]
    ignored += [f"{where}.{k}" for k in CONTAINER_IGNORED if first.get(k) not in
                (None, {}, [])]
    if memory is not None:
        ignored.append(f"{where}.resources.limits.memory")
    if len(containers) > 1:
        ignored.append("spec.template.spec.containers[1:]")
    ignored = [f for f in ignored if f != f"{where}.image"]  # announced on its own
    cpu_limit = ((first.get("resources") or {}).get("limits") or {}).get("cpu")
    return NotebookSpec(meta["name"], meta.get("namespace", "default"), first["name"],
                        tuple(env), str(first["image"]),
                        None if cpu_limit is None else str(cpu_limit), cpus, gpus, memory,
                        tuple(ignored))


def differences(spec: NotebookSpec) -> list[tuple[str, dict[str, str]]]:
    """The DIFFERENT rows of fidelity/rules.py this Notebook runs into (announced at apply)."""
    found = [("notebook.image", {"value": spec.image})]
    if spec.cpus is not None:
        found.append(("notebook.cpu", {"value": str(spec.cpu_limit), "size": str(spec.cpus)}))
    if spec.ignored:
        found.append(("notebook.cluster-fields", {"fields": ", ".join(spec.ignored)}))
    return found
