"""A pod's container on the local backend: name, labels, files, working folder, network.

What every kind shares when it runs an image (training replicas, trials, model servers):
- the manifest's folder is mounted where the cluster backend's work-folder ConfigMap puts
  a workload's files (lab/backends/cluster/workload.py): read-only at /kflab/files, and
  writable at /kflab/work, which is the working folder (so what the program writes lands
  in the manifest's folder, as with a local process);
- the working folder: `workingDir` when set (a relative one under /kflab/work), else
  /kflab/work when the manifest gives a command (the cluster backend runs commands there),
  else the image's own WORKDIR (its entrypoint expects it);
- a network per job, in which each replica answers to the names the operator's Services
  give it (`<job>-master-0`, `<job>-worker-1.<ns>.svc`...): the Kubeflow SDK's
  ContainerBackend makes one per multi-node TrainJob the same way (backend.py `train`);
- labels (cleanup.py), and a note in the state folder of which engines ran containers, so
  `kflab down` asks only those.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from lab.backends.local.containers import cleanup
from lab.backends.local.containers.engine import Engine
from lab.backends.local.containers.spec import ContainerSpec
from lab.backends.local.runners import FILES_DIR, WORK_DIR, ContainerRun, Mount

_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def slug(text: str, limit: int = 40) -> str:
    return _UNSAFE.sub("-", text).strip("-.")[:limit] or "x"


def name_for(owner: str, part: str) -> str:
    """A container name unique per start: kflab-<owner>-<part>-<random>."""
    return f"kflab-{slug(owner.replace('/', '-'))}-{slug(part, 30)}-{secrets.token_hex(3)}"


def files(base_dir: Path) -> tuple[Mount, ...]:
    folder = Path(base_dir).resolve()
    return (Mount(folder, WORK_DIR), Mount(folder, FILES_DIR, read_only=True))


def workdir(spec: ContainerSpec) -> str | None:
    if spec.working_dir:
        wd = spec.working_dir
        return wd if wd.startswith("/") else f"{WORK_DIR}/{wd}".rstrip("/")
    return WORK_DIR if spec.command else None


def container(engine: Engine, spec: ContainerSpec, *, root: Path, token: str, owner: str,
              part: str, env: Sequence[tuple[str, str]], base_dir: Path | None,
              network: str | None = None, aliases: Sequence[str] = (),
              hostname: str | None = None, gpus: Sequence[str] = (),
              mounts: Sequence[Mount] = (), publish: Sequence[tuple[int, int]] = ()
              ) -> ContainerRun:
    """The ContainerRun of one replica/trial/server (a fresh name each call)."""
    cleanup.note_engine(root, engine.path)
    return ContainerRun(
        engine, spec, name_for(owner, part), list(env), cleanup.labels(root, token, owner),
        network=network, aliases=tuple(aliases), hostname=hostname,
        mounts=(*(files(base_dir) if base_dir is not None else ()), *mounts),
        publish=tuple(publish), gpus=tuple(gpus), workdir=workdir(spec))


def create_network(engine: Engine, root: Path, token: str, owner: str) -> str:
    """A bridge network with name resolution for one job's replicas."""
    cleanup.note_engine(root, engine.path)
    name = name_for(owner, "net")
    engine.run("network", "create", *cleanup.label_args(cleanup.labels(root, token, owner)),
               name, timeout=60, check=f"to create the job's network {name}")
    return name


def remove_network(engine: Engine, name: str, wait: float = 10.0) -> None:
    """Remove a job's network once its containers are gone (Docker removes a `--rm`
    container just after its client returns, so the first tries may find it attached)."""
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(Exception):
            if engine.run("network", "rm", name, timeout=30).returncode == 0:
                return
        listed = engine.run("network", "ls", "-q", "--filter", f"name=^{name}$", timeout=30)
        if listed.returncode == 0 and not listed.stdout.strip():
            return
        if time.monotonic() >= deadline:
            return  # `kflab down` removes it by its labels
        time.sleep(0.2)


def limits_note(engine: Engine, specs: Sequence[ContainerSpec]) -> str | None:
    """What to tell the user when the manifest's cpu/memory limits cannot be applied."""
    limited = [s.where for s in specs if s.cpus or s.memory]
    if not limited or engine.limits:
        return None
    return (f"note: {engine.label} on cgroups {engine.cgroups} cannot apply resources.limits "
            f"cpu and memory ({limited[0]}{' ...' if len(limited) > 1 else ''}): the "
            "containers run without them")
