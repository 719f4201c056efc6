"""A training job's replicas in containers: which engine, the images, each replica's run.

When a replica's image is not one kflab runs as a local process (containers/choice.py), all
the job's replicas run as containers of their own images, in one network per job where
each answers to the names the operator gives it (Flavor.hostnames: `<job>-master-0`,
`<job>-worker-1.<ns>.svc`...), with the operator's environment as on a cluster -- its
host names and ports (Flavor.cluster_ports), not loopback ones -- and the container's
command/args/env/workingDir/limits by Kubernetes' rules (containers/spec.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lab.backends.local.containers import choice, images, workload
from lab.backends.local.containers import spec as cspec
from lab.backends.local.containers.engine import Engine
from lab.backends.local.runners import ContainerRun, Mount
from lab.backends.local.training.spec import JobSpec, Replica


def engine_for(job: JobSpec, obj: dict[str, Any]) -> Engine | None:
    """The engine for the job's containers, or None when its replicas run as processes
    (then each needs its command: refused otherwise, as before). Raises when the job needs
    an engine that is missing or not running, naming it."""
    found = [(f"{rep.where}.image", rep.image) for rep in job.replicas.values()]
    engine = choice.engine_for(found, obj, f"{job.kind} {job.name}")
    if engine is None:
        for rep in job.replicas.values():
            job.flavor.check_command(rep)
    return engine


def container_spec(rep: Replica, env: Sequence[tuple[str, str]] | None = None
                   ) -> cspec.ContainerSpec:
    return cspec.read(rep.container if isinstance(rep.container, dict) else {},
                      rep.where, env=env)


def preflight(engine: Engine, job: JobSpec) -> None:
    """Refuse, before anything is applied, an image that Never may not pull or that is
    built for another architecture (containers/images.py)."""
    for rep in job.replicas.values():
        spec = container_spec(rep)
        images.preflight(engine, spec.image, spec.pull_policy, where=f"{rep.where}.image")


def pull(engine: Engine, job: JobSpec, emit: Callable[[dict[str, Any]], None] | None,
         *, pulled: bool = False) -> None:
    """Every image of the job present (each once), as its imagePullPolicy asks; `pulled`:
    an earlier step of this same apply already pulled them (a background supervisor)."""
    seen: set[str] = set()
    note = workload.limits_note(engine, [container_spec(r) for r in job.replicas.values()])
    if note and emit:
        emit({"event": "message", "text": note})
    for rep in job.replicas.values():
        spec = container_spec(rep)
        if spec.image in seen:
            continue
        seen.add(spec.image)
        policy = "IfNotPresent" if pulled and spec.pull_policy == "Always" else \
            spec.pull_policy
        images.ensure(engine, spec.image, policy, where=f"{rep.where}.image", emit=emit)


def pod_env(job: JobSpec, rep: Replica, index: int) -> list[tuple[str, str]]:
    """The replica container's variables in order: its own, then the operator's (with the
    cluster's host names and ports), as the operator appends them to the pod."""
    ports = job.flavor.cluster_ports(job)
    return [*rep.env, *job.flavor.operator_env(job, rep, index, ports, host=_same)]


def _same(name: str) -> str:
    return name


def replica_run(engine: Engine, job: JobSpec, rep: Replica, index: int, *, root: Path,
                token: str, base_dir: Path, network: str | None,
                gpus: Sequence[str], mounts: Sequence[Mount] = ()) -> ContainerRun:
    env = pod_env(job, rep, index)
    names = job.flavor.hostnames(job, rep, index)
    owner = f"{job.kind}/{job.namespace}/{job.name}"
    return workload.container(engine, container_spec(rep, env), root=root, token=token,
                              owner=owner, part=rep.name(index), env=env, base_dir=base_dir,
                              network=network, aliases=names if network else (),
                              hostname=names[0], gpus=gpus, mounts=mounts)
