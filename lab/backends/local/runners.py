"""How a workload's program starts: a local process or a container, behind one interface.

As kfp.local has SubprocessRunner and DockerRunner, the local backend has two runners with
one method, `start(group, label, stdout) -> Popen`, and every handler (training replicas,
Katib trials, model servers) starts its workload through it. The Popen is what the
supervisors already watch: for a container it is the engine's foreground `run` client,
whose output is the container's and whose exit code is the container's (128+N when a
signal ended it, as the kubelet reports), so restarts, backoff, logs and metrics collectors
work the same for both. What the container runner adds (containers/): the image's
semantics for command/args/env/workingDir, a network per job, mounts, limits, GPUs, and the
labels by which any kflab command removes leftovers.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar, Protocol

from lab.backends.local.containers import cleanup
from lab.backends.local.containers.engine import Engine
from lab.backends.local.containers.spec import ContainerSpec, entry, final_env
from lab.backends.local.procs import LOOPBACK, ChildGroup
from lab.errors import LabError

# Where the cluster backend's work-folder ConfigMap puts a workload's files
# (lab/backends/cluster/workload.py FILES_DIR, WORK_DIR): the same paths here.
FILES_DIR, WORK_DIR = "/kflab/files", "/kflab/work"


class Runner(Protocol):
    kind: ClassVar[str]

    def start(self, group: ChildGroup, label: str,
              stdout: IO[bytes] | int | None) -> subprocess.Popen[bytes]:
        """Start the workload as a child of `group` (stopped with it), output to stdout."""
        ...

    def describe(self) -> str:
        """What runs, for messages and the run log."""
        ...


@dataclass
class ProcessRun:
    """A local process: argv in cwd with env (the process runner, as before)."""

    kind: ClassVar[str] = "process"
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    pass_fds: Sequence[int] = ()

    def start(self, group: ChildGroup, label: str,
              stdout: IO[bytes] | int | None) -> subprocess.Popen[bytes]:
        return group.start(self.argv, label=label, cwd=self.cwd, env=self.env, stdout=stdout,
                           pass_fds=self.pass_fds)

    def describe(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class Mount:
    host: Path
    container: str
    read_only: bool = False


@dataclass
class ContainerRun:
    """One container of `spec`'s image, as the pod's container would run."""

    kind: ClassVar[str] = "container"
    engine: Engine
    spec: ContainerSpec
    name: str  # the engine's container name (unique per start)
    env: list[tuple[str, str]]  # the pod's variables in order: container env, then operator's
    labels: dict[str, str]
    network: str | None = None
    aliases: tuple[str, ...] = ()
    hostname: str | None = None
    mounts: tuple[Mount, ...] = ()
    publish: tuple[tuple[int, int], ...] = ()  # (127.0.0.1 port, container port)
    gpus: tuple[str, ...] = ()  # ids from the GPU ledger (gpus.py)
    workdir: str | None = None  # overrides the image's WORKDIR (None: keep it)
    client_env: Mapping[str, str] | None = field(default=None)

    def argv(self) -> list[str]:
        env = final_env(self.env)
        entrypoint, args = entry(self.spec, env)
        out = ["run", "--rm", "--name", self.name, "--pull", "never",
               *cleanup.label_args(self.labels)]
        if self.network:
            out += ["--network", self.network]
            for alias in self.aliases:
                out += ["--network-alias", alias]
        if self.hostname:
            out += ["--hostname", self.hostname]
        for key, value in env.items():
            out += ["-e", f"{key}={value}"]
        z = ",z" if self.engine.selinux else ""
        for m in self.mounts:
            for path in (str(m.host), m.container):
                if any(c in path for c in ":,\n") or not path.startswith("/"):
                    raise LabError(f"{self.spec.where}: cannot mount {path!r} in a "
                                   "container: a bind mount's paths are absolute and hold "
                                   "no ':' or ','",
                                   hint="move the folder, or change the path in the manifest")
            out += ["-v", f"{m.host}:{m.container}:{'ro' if m.read_only else 'rw'}{z}"]
        if self.workdir:
            out += ["-w", self.workdir]
        if self.spec.cpus and self.engine.limits:
            out += ["--cpus", self.spec.cpus]
        if self.spec.memory and self.engine.limits:
            out += ["--memory", str(self.spec.memory)]
        out += gpu_args(self.engine, self.gpus)
        for host, port in self.publish:
            out += ["-p", f"{LOOPBACK}:{host}:{port}"]
        if entrypoint is not None:
            out += ["--entrypoint", entrypoint]
        return self.engine.argv(*out, str(images_ref(self.spec.image)), *args)

    def start(self, group: ChildGroup, label: str,
              stdout: IO[bytes] | int | None) -> subprocess.Popen[bytes]:
        env = dict(os.environ if self.client_env is None else self.client_env)
        proc = group.start(self.argv(), label=label, env=env, stdout=stdout)
        group.on_reaped(proc, self._reaped)
        return proc

    def _reaped(self, code: int | None) -> None:
        """The client ended: a client killed by a signal leaves its container behind."""
        if code is None or code < 0:
            cleanup.remove_name(self.engine.path, self.name)

    def describe(self) -> str:
        return f"{self.engine.name} container {self.name} of {self.spec.image}"


def images_ref(image: str) -> str:
    """The fully qualified name the engines are given (no short-name lookup, no prompt)."""
    from lab.backends.local.containers.images import parse

    ref = parse(image)
    return str(ref) if ref is not None else image


def gpu_args(engine: Engine, ids: Sequence[str]) -> list[str]:
    """The engine's flags for these GPUs: CDI device names for Podman
    (`nvidia.com/gpu=ID`, as `nvidia-ctk cdi generate` names them by index and by UUID),
    `--gpus "device=ID,..."` for Docker (the NVIDIA Container Toolkit; the quotes keep the
    commas inside one CSV field)."""
    if not ids:
        return []
    if engine.name == "podman":
        out: list[str] = []
        for gpu in ids:
            out += ["--device", f"nvidia.com/gpu={gpu}"]
        return out
    return ["--gpus", f'"device={",".join(ids)}"']
