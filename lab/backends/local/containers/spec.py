"""A Kubernetes container, read for a container engine: what `podman run`/`docker run` needs.

Kubernetes' rules, kept (k8s.io/api core/v1 Container; the kubelet's
pkg/kubelet/kuberuntime/kuberuntime_container.go and the CRI runtimes' handling of
command/args; third_party/forked/golang/expansion for `$(VAR)`):
- `command` replaces the image's ENTRYPOINT and drops its CMD; `args` alone replace CMD and
  keep ENTRYPOINT; neither runs the image's own ENTRYPOINT + CMD; an empty list is unset;
- `$(VAR)` in command, args and env values is the container's variable VAR when it is
  defined (earlier env entries for an env value), `$$` is a literal `$`, anything else stays;
- resources.limits cpu and memory cap the container (requests only schedule a pod);
- `workingDir` overrides the image's WORKDIR.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from lab.backends.local.containers import images
from lab.errors import InputError

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$")
_SUFFIX = {"m": Decimal("0.001"), "": Decimal(1), "k": Decimal(10) ** 3,
           "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
           "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10,
           "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
           "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_VAR = re.compile(r"\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)|\$\$")


def quantity(raw: Any, where: str) -> Decimal:
    """A Kubernetes resource quantity (`500m`, `2`, `512Mi`, `1e3`) as a number."""
    m = _QUANTITY.match(str(raw).strip()) if isinstance(raw, str | int | float) \
        and not isinstance(raw, bool) else None
    try:
        if m is None:
            raise InvalidOperation
        number = Decimal(m.group(1))
        if m.group(2):
            number *= Decimal(10) ** int(m.group(2)[1:])
        number *= _SUFFIX[m.group(3) or ""]
    except InvalidOperation:
        raise InputError(None, where, f"{raw!r} is not a resource quantity",
                         hint="write e.g. cpu: 500m or memory: 512Mi") from None
    if number < 0:
        raise InputError(None, where, f"{raw!r} is negative", hint="use a positive quantity")
    return number


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion of one string."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


@dataclass(frozen=True)
class Port:
    container: int
    host: int | None = None  # hostPort: the local port asked for (127.0.0.1 only)
    name: str = ""


@dataclass(frozen=True)
class ContainerSpec:
    """One container of a manifest, as a container engine runs it."""

    where: str  # the container's field path, for messages
    image: str
    pull_policy: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str | None = None
    cpus: str | None = None  # --cpus (decimal CPUs)
    memory: int | None = None  # --memory (bytes)
    ports: tuple[Port, ...] = field(default=())

    def port(self, name: str | None = None, default: int | None = None) -> Port | None:
        """The named port (or the first), else one at `default`."""
        for p in self.ports:
            if name is None or p.name == name:
                return p
        return Port(default) if default is not None else None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(a, str | int | float) and not isinstance(a, bool) for a in value):
        raise InputError(None, where, "expected a list of strings",
                         hint='write it as ["python", "train.py"] (one item per argument)')
    return tuple(str(a) for a in value)


def _int(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 65535:
        raise InputError(None, where, f"expected a port number 1-65535, got {raw!r}",
                         hint="containerPort: 8080")
    return raw


def read(container: dict[str, Any], where: str,
         env: Sequence[tuple[str, str]] | None = None) -> ContainerSpec:
    """The container mapping at `where` (already validated for its kind), for an engine.
    `env` replaces the container's own env list when the caller resolved it already."""
    image = container.get("image")
    if not isinstance(image, str) or images.parse(image) is None:
        raise InputError(None, f"{where}.image", f"{image!r} is not an image reference",
                         hint="write it as [registry/]name[:tag], e.g. python:3.11-slim")
    policy = container.get("imagePullPolicy") or images.default_policy(image)
    if policy not in images.POLICIES:
        raise InputError(None, f"{where}.imagePullPolicy", f"unknown policy {policy!r}",
                         hint="use Always, IfNotPresent or Never")
    if env is None:
        env = [(str(e["name"]), str(e.get("value", "")))
               for e in container.get("env") or [] if isinstance(e, dict) and "name" in e
               and "valueFrom" not in e]
    for i, (name, _) in enumerate(env):
        if not _ENV_NAME.match(name):  # the API server's rule (IsEnvVarName)
            raise InputError(None, f"{where}.env[{i}].name", f"{name!r} is not a valid "
                             "variable name", hint="use letters, digits, '_', '-' and '.'")
    workdir = container.get("workingDir")
    limits = ((container.get("resources") or {}).get("limits") or {}) \
        if isinstance(container.get("resources"), dict) else {}
    cpus = memory = None
    if isinstance(limits, dict) and limits.get("cpu") is not None:
        value = quantity(limits["cpu"], f"{where}.resources.limits.cpu")
        cpus = format(value.normalize(), "f") if value else None
    if isinstance(limits, dict) and limits.get("memory") is not None:
        memory = int(quantity(limits["memory"], f"{where}.resources.limits.memory")) or None
    ports = []
    for i, p in enumerate(container.get("ports") or []):
        if not isinstance(p, dict):
            continue
        cport = _int(p.get("containerPort"), f"{where}.ports[{i}].containerPort")
        host = p.get("hostPort")
        ports.append(Port(cport, _int(host, f"{where}.ports[{i}].hostPort")
                          if host not in (None, 0) else None, str(p.get("name") or "")))
    return ContainerSpec(where, image, policy, _strings(container.get("command"),
                                                        f"{where}.command"),
                         _strings(container.get("args"), f"{where}.args"), tuple(env),
                         str(workdir) if workdir else None, cpus, memory, tuple(ports))


def entry(spec: ContainerSpec, env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """(the --entrypoint to set or None, the arguments after the image), by Kubernetes'
    command/args rules with `$(VAR)` expanded from the container's final `env`."""
    command = [expand(a, env) for a in spec.command]
    args = [expand(a, env) for a in spec.args]
    if command:
        return command[0], command[1:] + args
    return None, args


def final_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The container's variables in order, each value's `$(VAR)` expanded from those before
    it (later entries win, as in a pod)."""
    out: dict[str, str] = {}
    for name, value in pairs:
        out[name] = expand(value, out)
    return out
