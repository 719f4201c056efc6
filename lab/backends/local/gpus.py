"""Which GPU each local workload holds: one allocation record for every kind.

On a cluster the scheduler gives a pod that asks for `nvidia.com/gpu` GPUs no other pod
holds, or leaves it Pending (`0/1 nodes are available: 1 Insufficient nvidia.com/gpu.`).
Locally every kind that takes GPUs -- PyTorchJob and TFJob replicas, TrainJob nodes, Katib
trials, notebook servers -- asks here, so two jobs never share GPU 0 while others sit idle.

The record is `<state>/gpus.json`, changed under a file lock (`gpus.lock`) by any kflab
process: `{holder: {"parts": {part: [gpu ids]}, "pid": P, "started": T}}`. A holder is
`Kind/namespace/name` (a Trial, a job...); parts are its replicas (`master-0`) or `main`.
The allocation lasts while process P (started at T) lives -- the process that runs the
workload: kflab's own process while it supervises a job, or a notebook's server -- so a
holder that died frees its GPUs for the next request without anyone cleaning up.

API (used by training, tuning and notebooks; TrainJob uses the same):
- `inventory()`: the GPU ids this machine offers (CUDA_VISIBLE_DEVICES, else NVML).
- `allocate(root, holder, asks)`: reserve now, or None when not enough are free.
- `acquire(root, holder, asks, on_pending=...)`: wait (Pending) until they are free.
- `bind(root, holder, pid)`: the process that holds them from now on.
- `release(root, holder)`, `held(root, holder)`, `holders(root)`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local.procs import is_running, start_time
from lab.kube.kinds import GPUS_ANNOTATION

RESOURCE = "nvidia.com/gpu"
ANNOTATION = GPUS_ANNOTATION  # which GPUs a resource holds, shown by get and describe
RECORD, LOCK = "gpus.json", "gpus.lock"
# The scheduler's words for a pod that cannot get its GPUs (one node: the lab machine).
INSUFFICIENT = f"0/1 nodes are available: 1 Insufficient {RESOURCE}."


def inventory(environ: dict[str, str] | None = None) -> list[str]:
    """GPU ids this machine offers: CUDA_VISIBLE_DEVICES when set, else NVML's device count
    (NVIDIA's own library, as nvidia-smi uses; no driver, or a Mac, means no GPUs)."""
    env = os.environ if environ is None else environ
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",")
                if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(nvml_device_count())]


def nvml_device_count() -> int:
    """NVIDIA GPUs the driver reports; 0 without nvidia-ml-py, the driver or a GPU."""
    try:
        import pynvml
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError:
        return 0
    finally:
        pynvml.nvmlShutdown()


def holder_of(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _live(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    pid, started = entry.get("pid"), entry.get("started")
    if type(pid) is not int or pid <= 0 or not isinstance(started, int | float):
        return False
    return is_running(pid, float(started))


def _parts(entry: dict[str, Any]) -> dict[str, list[str]]:
    parts = entry.get("parts")
    if not isinstance(parts, dict):
        return {}
    return {str(k): [str(g) for g in v] for k, v in parts.items() if isinstance(v, list)}


def _read(root: Path) -> dict[str, dict[str, Any]]:
    """The live allocations (entries of dead holders, or unreadable ones, are dropped)."""
    try:
        data = state.read_json(state.path(root, RECORD), fix="nothing to do: GPUs are "
                               "allocated again by the next workload")
    except state.StateError:
        data = None
    return {str(h): e for h, e in (data or {}).items() if _live(e)}


def holders(root: Path) -> dict[str, dict[str, list[str]]]:
    """Every live holder and its GPUs per part."""
    return {h: _parts(e) for h, e in _read(root).items()}


def held(root: Path, holder: str) -> dict[str, list[str]]:
    return holders(root).get(holder, {})


def allocate(root: Path, holder: str, asks: dict[str, int], *,
             available: list[str] | None = None,
             pid: int | None = None) -> dict[str, list[str]] | None:
    """Reserve `asks` (part -> count) for `holder`, replacing what it held; the lowest free
    ids first, parts in the order given. None when not enough are free now (the caller
    waits, as a Pending pod does). `pid` (default: this process) holds them."""
    need = sum(asks.values())
    ids = inventory() if available is None else available
    if need == 0:
        release(root, holder)
        return {part: [] for part in asks}
    pid = os.getpid() if pid is None else pid
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        current.pop(holder, None)
        taken = {g for e in current.values() for gs in _parts(e).values() for g in gs}
        free = [g for g in ids if g not in taken]
        if len(free) < need:
            return None
        plan, pos = {}, 0
        for part, n in asks.items():
            plan[part] = free[pos:pos + n]
            pos += n
        current[holder] = {"parts": plan, "pid": pid, "started": start_time(pid)}
        state.write_json(state.path(root, RECORD), current)
    return plan


def acquire(root: Path, holder: str, asks: dict[str, int], *,
            available: list[str] | None = None,
            on_pending: Callable[[str], None] | None = None,
            poll: float = 0.5) -> dict[str, list[str]]:
    """`allocate`, waiting while other workloads hold the GPUs; `on_pending(message)` is
    called once, with the scheduler's message, when the request has to wait."""
    told = False
    while True:
        plan = allocate(root, holder, asks, available=available)
        if plan is not None:
            return plan
        if not told and on_pending is not None:
            on_pending(INSUFFICIENT)
            told = True
        time.sleep(poll)


def bind(root: Path, holder: str, pid: int) -> None:
    """From now on process `pid` holds `holder`'s GPUs (e.g. the server it started)."""
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        if holder in current:
            current[holder].update(pid=pid, started=start_time(pid))
            state.write_json(state.path(root, RECORD), current)


def release(root: Path, holder: str) -> None:
    with state.held(state.path(root, LOCK)):
        current = _read(root)
        if current.pop(holder, None) is not None:
            state.write_json(state.path(root, RECORD), current)


def describe(plan: dict[str, list[str]]) -> str:
    """The annotation's text: `master-0=0,1 worker-0=2`, or one list for a single part."""
    used = {p: g for p, g in plan.items() if g}
    if list(used) == ["main"]:
        return ",".join(used["main"])
    return " ".join(f"{p}={','.join(g)}" for p, g in used.items())
