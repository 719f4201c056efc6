"""Finding and stopping kflab's containers and networks from any kflab command.

Every container and network kflab creates carries labels, as procs.py tags processes with
KFLAB_RUN: `dev.kflab.run` (the owner's run token: the lease token of a job or experiment,
the record tag of a model server), `dev.kflab.state` (which state folder: `kflab down`
removes all of one folder's) and `dev.kflab.owner` (Kind/namespace/name, for people
reading `podman ps`). So whatever stops an owner's processes -- its own Ctrl-C, `kflab
delete`/`down` from another terminal, the next command noticing a dead owner -- also
removes its containers, even those whose `run` client was killed outright (a container
outlives its client: Docker's always, Podman's when the client gets SIGKILL).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from lab import state

RUN, STATE, OWNER = "dev.kflab.run", "dev.kflab.state", "dev.kflab.owner"
USED, USED_LOCK = "containers.json", "containers.lock"  # engines that ran containers here
ENGINES = ("podman", "docker")
TIMEOUT = 60.0


def state_id(root: Path) -> str:
    """The state folder's label value (its resolved path, hashed)."""
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]


def labels(root: Path, token: str, owner: str) -> dict[str, str]:
    return {RUN: token, STATE: state_id(root), OWNER: owner}


def label_args(values: dict[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        out += ["--label", f"{key}={value}"]
    return out


def client_of(argv: Sequence[str]) -> tuple[str, str] | None:
    """(engine CLI, run token) when argv is a `podman/docker run` kflab started, else None."""
    if len(argv) < 2 or os.path.basename(argv[0]) not in ENGINES or "run" not in argv[1:3]:
        return None
    for i, arg in enumerate(argv[:-1]):
        if arg == "--label" and argv[i + 1].startswith(f"{RUN}="):
            return argv[0], argv[i + 1].split("=", 1)[1]
    return None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def remove(engine: str, label: str, value: str) -> int:
    """Remove (killing first) every container, then network, labelled label=value; returns
    how many containers were removed."""
    done = _run([engine, "ps", "-aq", "--filter", f"label={label}={value}"])
    ids = sorted(set(done.stdout.split())) if done and done.returncode == 0 else []
    if ids:
        kill = [engine, "rm", "-f"] + (["-t", "0"] if os.path.basename(engine) == "podman"
                                       else [])
        _run(kill + ids)
    nets = _run([engine, "network", "ls", "-q", "--filter", f"label={label}={value}"])
    for net in sorted(set(nets.stdout.split())) if nets and nets.returncode == 0 else []:
        _run([engine, "network", "rm", net])
    return len(ids)


def remove_name(engine: str, name: str) -> None:
    """Remove one container by name, whatever its state (its client died)."""
    kill = [engine, "rm", "-f"] + (["-t", "0"] if os.path.basename(engine) == "podman"
                                   else [])
    _run([*kill, name])


def sweep(argvs: Iterable[Sequence[str]]) -> int:
    """Remove the containers of every `run` client among `argvs` (records of processes that
    were stopped); each (engine, token) once."""
    found = {c for c in (client_of(a) for a in argvs) if c is not None}
    return sum(remove(engine, RUN, token) for engine, token in sorted(found))


def note_engine(root: Path, engine: str) -> None:
    """Remember that the CLI `engine` ran containers for this state folder."""
    target = state.path(root, USED)
    with state.held(state.path(root, USED_LOCK)):
        if engine not in used_engines(root):
            state.write_json(target, sorted({*used_engines(root), engine}))


def used_engines(root: Path) -> list[str]:
    try:
        return [str(e) for e in state.read_json(state.path(root, USED), expect=list) or []]
    except state.StateError:
        return []


def sweep_state(root: Path) -> int:
    """Every container and network of this state folder (`kflab down`), asking only the
    engines that ran containers here (none: nothing is asked)."""
    return sum(remove(exe, STATE, state_id(root)) for exe in used_engines(root)
               if os.path.basename(exe) in ENGINES and os.path.isabs(exe))
