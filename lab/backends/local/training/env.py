"""The environment each replica gets: the kind's operator variables on a cleaned-up base.

What the operator appends per kind is in pytorch.py and tensorflow.py; here is what every
kind shares: inherited distributed variables are removed, the replica service names written
in the manifest become 127.0.0.1, GPUs are planned per replica (CUDA_VISIBLE_DEVICES), and
this Python's folder comes first on PATH.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

from lab.backends.local.gpu_devices import given
from lab.backends.local.gpus import inventory, shortage
from lab.backends.local.gpus import nvml_device_count as nvml_device_count
from lab.backends.local.procs import LOOPBACK
from lab.backends.local.training.spec import JobSpec, Replica
from lab.errors import LabError

# Inherited variables that would contradict the contract (a shell inside torchrun, etc.).
_SCRUB = re.compile(r"^(MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|"
                    r"GROUP_RANK|ROLE_RANK|ROLE_WORLD_SIZE|CUDA_VISIBLE_DEVICES|KFLAB_GIVEN_GPUS|"
                    r"PET_.*|TORCHELASTIC_.*|TF_CONFIG)$")



def visible_gpus(environ: dict[str, str] | None = None) -> list[str]:
    """UUIDs of the GPUs kflab may give out (gpus.inventory: NVML, narrowed by the user's
    CUDA_VISIBLE_DEVICES); refuses a variable that names a GPU wrongly."""
    return inventory(environ)


def available_for(job: JobSpec) -> list[str]:
    """The GPUs kflab may give out, for a job; a wrong CUDA_VISIBLE_DEVICES is refused only
    when the job asks for GPUs (one that asks for none is shown none either way)."""
    if not any(rep.gpus for rep, _ in job.ordered()):
        return []
    return visible_gpus()


def loopback_ifname() -> str:
    """The loopback interface's name for GLOO/NCCL_SOCKET_IFNAME: `lo` on Linux (also inside
    the job's private namespace), `lo0` on macOS and the BSDs."""
    names = {name for _, name in socket.if_nameindex()}
    return next((n for n in ("lo", "lo0") if n in names), "lo")


def plan_gpus(job: JobSpec, available: list[str]) -> dict[str, list[str]]:
    """Non-overlapping GPU ids per replica name, in rank order; refuses what cannot fit."""
    asks = [(rep.name(i), rep.gpus) for rep, i in job.ordered()]
    need = sum(n for _, n in asks)
    if need > len(available):
        detail = ", ".join(f"{name}: {n}" for name, n in asks if n)
        raise LabError(
            f"{job.kind} '{job.name}' asks for {need} GPU(s) ({detail}) but "
            f"{shortage(need, len(available))}",
            hint="lower the nvidia.com/gpu limits or the replica counts "
                 "(`kflab doctor` lists the GPUs)")
    plan, pos = {}, 0
    for name, n in asks:
        plan[name] = available[pos:pos + n]
        pos += n
    return plan


def service_names(job: JobSpec) -> list[str]:
    """The headless service names the operator creates, one per replica."""
    return [f"{job.name}-{rep.name(i)}" for rep, i in job.ordered()]


def localize(value: str, names: list[str], namespace: str | None = None) -> str:
    """Replace replica service host names (also `NAME.NAMESPACE.svc[.cluster.local]`, as
    TF_CONFIG writes them on a cluster) by the loopback address."""
    suffix = (rf"(?:\.{re.escape(namespace)}(?:\.svc(?:\.cluster\.local)?)?)?"
              if namespace else "")
    for name in names:
        value = re.sub(rf"(?<![-\w.]){re.escape(name)}{suffix}(?![-\w])", LOOPBACK, value)
    return value


def operator_env(job: JobSpec, rep: Replica, index: int, *, master_port: int = 0,
                 rdzv_port: int = 0, ports: dict[str, int] | None = None,
                 ) -> list[tuple[str, str]]:
    """The variables the operator appends to the container's env, in its order; `ports`
    are the job's chosen ports (Flavor.ports), or a PyTorchJob's master and rendezvous."""
    chosen = ports if ports is not None else {"master": master_port, "rdzv": rdzv_port}
    return job.flavor.operator_env(job, rep, index, chosen)


def replica_env(job: JobSpec, rep: Replica, index: int, *, master_port: int = 0,
                rdzv_port: int = 0, ports: dict[str, int] | None = None,
                gpus: list[str] | None, host_has_gpus: bool,
                base: dict[str, str] | None = None) -> dict[str, str]:
    """The full process environment of one replica.

    Base: this process's environment minus distributed variables that would contradict the
    contract, with this Python's folder first on PATH (so `python` in a manifest's command
    is the lab's interpreter). Then the container's env (service names made local), then
    the operator's variables, which win on a clash as later entries do in a pod.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not _SCRUB.match(k)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    names = service_names(job)
    for key, value in rep.env:
        env[key] = localize(value, names, job.namespace)
    env.update(operator_env(job, rep, index, master_port=master_port, rdzv_port=rdzv_port,
                            ports=ports))
    if gpus or host_has_gpus:
        # No nvidia.com/gpu limit means no GPU, as with the device plugin. UUIDs, as the
        # device plugin gives a pod its devices; KFLAB_GIVEN_GPUS marks the value as
        # kflab's, so a kflab command run in the replica sees the machine (gpu_devices.py).
        env.update(given(gpus or []))
    return env
