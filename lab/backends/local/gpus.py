"""Which GPU each local workload holds: one allocation record for every kind.

On a cluster the scheduler gives a pod that asks for `nvidia.com/gpu` GPUs no other pod
holds, or leaves it Pending (`0/1 nodes are available: 1 Insufficient nvidia.com/gpu.`).
Locally every kind that takes GPUs -- PyTorchJob and TFJob replicas, TrainJob nodes, Katib
trials, notebook servers -- asks here, so two jobs never share GPU 0 while others sit idle.

The record is `<state>/gpus.json`, changed under a file lock (`gpus.lock`) by any kflab
process: `{holder: {"parts": {part: [GPU UUIDs]}, "pid": P, "started": T, "token": K,
"owner": O}}`. A holder is `Kind/namespace/name` (a Trial, a job...); parts are its
replicas (`master-0`) or `main`. GPUs are named by NVML UUID only (gpu_devices.py), so an
index and a UUID can never be two GPUs to the ledger.

A GPU is free only when no process of its holder runs. P (started at T) is the process that
holds the GPUs -- kflab's own process while it supervises a job, or a notebook's server; K
is the KFLAB_RUN token every process it started carries (procs.py) and O the resource whose
owner record (owners.py) lists them. When P is gone (killed, even by SIGKILL) but its
replicas still run, the next kflab command that reads the record stops them (the owner
record's process groups, then everything carrying K) before it places anything, and frees
the GPUs only once none is left; one it may not stop keeps them held.

API (used by training, tuning and notebooks; TrainJob uses the same):
- `inventory()`: the UUIDs of the GPUs kflab may give out (gpu_devices.view).
- `allocate(root, holder, asks)`: reserve now, or None when not enough are free.
- `acquire(root, holder, asks, on_pending=...)`: wait (Pending) until they are free.
- `bind(root, holder, pid, token)`: the process that holds them from now on.
- `release(root, holder)`, `held(root, holder)`, `holders(root)`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local import gpu_devices, owners
from lab.backends.local.procs import is_running, start_time, stop_all, tagged
from lab.errors import LabError
from lab.kube.kinds import GPUS_ANNOTATION

RESOURCE = "nvidia.com/gpu"
ANNOTATION = GPUS_ANNOTATION  # which GPUs a resource holds, shown by get and describe
RECORD, LOCK = "gpus.json", "gpus.lock"
# The scheduler's words for a pod that cannot get its GPUs (one node: the lab machine).
INSUFFICIENT = f"0/1 nodes are available: 1 Insufficient {RESOURCE}."


def inventory(environ: dict[str, str] | None = None) -> list[str]:
    """UUIDs of the GPUs kflab may give out here: NVML's, narrowed by the user's
    CUDA_VISIBLE_DEVICES (gpu_devices.py). Refuses (GpuError, one line naming the entry) a
    variable that names a GPU this machine lacks, or one twice."""
    return gpu_devices.view(environ).check()


def machine_has_gpus() -> bool:
    """Whether NVML lists any GPU (a workload that asks for none is then shown none)."""
    return bool(gpu_devices.machine().gpus)


def nvml_device_count() -> int:
    """NVIDIA GPUs the driver reports; 0 without nvidia-ml-py, the driver or a GPU."""
    return len(gpu_devices.machine().gpus)


def shortage(need: int, have: int) -> str:
    """Why `have` GPUs only, for a refusal: the discovery's reason when it found fewer than
    the machine may have (no NVML, CUDA_VISIBLE_DEVICES=none...)."""
    why = gpu_devices.view().why
    return f"this machine has {have}" + (f": {why}" if why else "")


def holder_of(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _holder_alive(entry: dict[str, Any]) -> bool:
    pid, started = entry.get("pid"), entry.get("started")
    if type(pid) is not int or pid <= 0 or not isinstance(started, int | float):
        return False
    return is_running(pid, float(started))


def _owner_record(root: Path, entry: dict[str, Any], token: str) -> dict[str, Any]:
    """The owner record that lists the holder's processes, if it is still that owner's
    (same token); else just the token, which every process it started carries."""
    owner = entry.get("owner")
    if isinstance(owner, str) and owner.count("/") == 2:
        kind, namespace, name = owner.split("/")
        with contextlib.suppress(LabError):
            record = owners.probe(root, kind, namespace, name).record
            if record and record.get("token") == token:
                return record
    return {"token": token}


def _left_running(root: Path, entry: dict[str, Any]) -> bool:
    """A dead holder's processes: stop them (its owner record's process groups, then all
    that carry its token); True while any is left (one we may not signal, say)."""
    token = entry.get("token")
    if not isinstance(token, str) or not token:
        return False
    record = _owner_record(root, entry, token)
    if record.get("procs"):
        owners.stop_leftovers(record)
    else:
        stop_all((), token, grace=3.0)
    return bool(tagged(token))


def _parts(entry: dict[str, Any]) -> dict[str, list[str]]:
    parts = entry.get("parts")
    if not isinstance(parts, dict):
        return {}
    return {str(k): [str(g) for g in v] for k, v in parts.items() if isinstance(v, list)}


def _read(root: Path) -> dict[str, dict[str, Any]]:
    """The live allocations; call with the lock held. A holder whose process is gone but
    whose replicas still run has them stopped here, and keeps its GPUs while any is left;
    unreadable entries are dropped."""
    try:
        data = state.read_json(state.path(root, RECORD), fix="nothing to do: GPUs are "
                               "allocated again by the next workload")
    except state.StateError:
        data = None
    if not isinstance(data, dict):
        data = {}
    live = {}
    for holder, entry in data.items():
        if not isinstance(entry, dict):
            continue
        if _holder_alive(entry) or _left_running(root, entry):
            live[str(holder)] = entry
    if data and len(live) != len(data):  # written back: the next reader need not look again
        state.write_json(state.path(root, RECORD), live)
    return live


def holders(root: Path) -> dict[str, dict[str, list[str]]]:
    """Every live holder and its GPUs (UUIDs) per part."""
    with state.held(state.path(root, LOCK)):
        return {h: _parts(e) for h, e in _read(root).items()}


def held(root: Path, holder: str) -> dict[str, list[str]]:
    return holders(root).get(holder, {})


def allocate(root: Path, holder: str, asks: dict[str, int], *,
             available: list[str] | None = None, pid: int | None = None,
             token: str | None = None, owner: str | None = None,
             ) -> dict[str, list[str]] | None:
    """Reserve `asks` (part -> count) for `holder`, replacing what it held; the lowest free
    ids first, parts in the order given. None when not enough are free now (the caller
    waits, as a Pending pod does). `pid` (default: this process) holds them; `token` is
    the KFLAB_RUN token of the processes it starts for them, `owner` the resource whose
    owner record lists those (`Kind/namespace/name`)."""
    need = sum(asks.values())
    ids = inventory() if available is None else available
    if need == 0:
        release(root, holder)
        return {part: [] for part in asks}
    pid = os.getpid() if pid is None else pid
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        earlier = current.pop(holder, None)
        if earlier is not None and not _holder_alive(earlier):
            # An earlier run of this name died and left processes it could not stop:
            # they keep their GPUs, under a name of their own.
            current[f"{holder} (earlier run)"] = earlier
        taken = {g for e in current.values() for gs in _parts(e).values() for g in gs}
        free = [g for g in ids if g not in taken]
        if len(free) < need:
            return None
        plan, pos = {}, 0
        for part, n in asks.items():
            plan[part] = free[pos:pos + n]
            pos += n
        current[holder] = {"parts": plan, "pid": pid, "started": start_time(pid),
                           "token": token, "owner": owner}
        state.write_json(state.path(root, RECORD), current)
    return plan


def acquire(root: Path, holder: str, asks: dict[str, int], *,
            available: list[str] | None = None,
            on_pending: Callable[[str], None] | None = None,
            poll: float = 0.5, token: str | None = None,
            owner: str | None = None) -> dict[str, list[str]]:
    """`allocate`, waiting while other workloads hold the GPUs; `on_pending(message)` is
    called once, with the scheduler's message, when the request has to wait."""
    told = False
    while True:
        plan = allocate(root, holder, asks, available=available, token=token, owner=owner)
        if plan is not None:
            return plan
        if not told and on_pending is not None:
            on_pending(INSUFFICIENT)
            told = True
        time.sleep(poll)


def bind(root: Path, holder: str, pid: int, token: str | None = None) -> None:
    """From now on process `pid` holds `holder`'s GPUs (e.g. the server it started; its
    own processes carry `token`)."""
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        if holder in current:
            current[holder].update(pid=pid, started=start_time(pid))
            if token is not None:
                current[holder]["token"] = token
            state.write_json(state.path(root, RECORD), current)


def release(root: Path, holder: str) -> None:
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        if current.pop(holder, None) is not None:
            state.write_json(state.path(root, RECORD), current)


def labels(ids: list[str]) -> str:
    """UUIDs as nvidia-smi numbers them, for people: `0,1`."""
    return ",".join(gpu_devices.label(g) for g in ids)


def describe(plan: dict[str, list[str]]) -> str:
    """The annotation's text: `master-0=0,1 worker-0=2`, or one list for a single part
    (nvidia-smi's numbers; the UUIDs are in the record and the workload's environment)."""
    used = {p: g for p, g in plan.items() if g}
    if list(used) == ["main"]:
        return labels(used["main"])
    return " ".join(f"{p}={labels(g)}" for p, g in used.items())
