"""Which GPUs this machine has, and which of them kflab may give out: one identity per GPU.

The identity is NVML's UUID (`GPU-...`; a MIG device's own `MIG-...`), the id the NVIDIA
device plugin advertises to the kubelet and the container toolkit hands to a pod. The GPU
ledger (gpus.py) keys on it, and every workload gets `CUDA_VISIBLE_DEVICES=<its UUIDs>`,
so `0`, `GPU-8932f937` and the full UUID are one GPU, whatever order CUDA counts in.

The user's CUDA_VISIBLE_DEVICES narrows what kflab may give out. It is read as CUDA reads
it (CUDA Programming Guide, "CUDA Environment Variables", CUDA_VISIBLE_DEVICES; PyTorch
mirrors the driver's reading in torch/cuda/__init__.py `_parse_visible_devices` and
`_transform_uuid_to_ordinals`, its cases in test/test_cuda.py `TestVisibleDeviceParses`):
unset is every GPU, empty is none; entries are nvidia-smi's indices (read as strtoul reads
them: `+1` and `1gpu` are 1), GPU UUIDs or prefixes naming one GPU (`GPU-8932f937`), or MIG
ids (`MIG-<uuid>`, or the older `MIG-GPU-<uuid>/<gi>/<ci>`), and the first entry decides
which kind the list is; the list ends at the first entry that names no GPU (`0,2,-1,1` is 0
and 2); a GPU named twice makes CUDA see none at all.

Where CUDA would quietly show fewer GPUs (or none), kflab refuses, naming the entry: an
index past the last GPU, a UUID or MIG id that matches none or several, an entry of another
kind than the first, a GPU named twice. What ends the list on purpose is honoured: a negative
index (`-1`), and, as the whole value, the words that mean "no GPU": `none` and `void` (the
NVIDIA container toolkit's values of NVIDIA_VISIBLE_DEVICES) and `NoDevFiles` (what Slurm
sets for a job without GPUs).

A value kflab set itself is not the user's: every workload kflab starts (a replica, a trial,
a notebook server and its kernels) gets its GPUs in CUDA_VISIBLE_DEVICES and the same value
in KFLAB_GIVEN_GPUS. A kflab command run inside such a workload (a notebook's terminal or
kernel, a job that submits jobs) sees the machine's GPUs and the ledger, as a pod's client
sees the cluster's scheduler rather than its own pod's devices.

Without NVML (nvidia-ml-py is in the `local` extra) kflab cannot tell one GPU from another,
so it gives out none and says why (`why`), in `kflab doctor` and in a job's refusal.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.deps import install_extras
from lab.errors import LabError

VARIABLE = "CUDA_VISIBLE_DEVICES"
GIVEN = "KFLAB_GIVEN_GPUS"  # what kflab set CUDA_VISIBLE_DEVICES to in a workload it started
NO_GPU_WORDS = ("none", "void", "NoDevFiles")  # a whole value meaning "no GPU", on purpose
BF16 = (8, 0)  # bf16 matrix units: compute capability 8.0 (Ampere) or newer


class GpuError(LabError):
    """CUDA_VISIBLE_DEVICES names a GPU this machine does not have, or one twice."""


@dataclass(frozen=True)
class Gpu:
    """One GPU (or one MIG device) as NVML reports it."""

    uuid: str  # GPU-... or MIG-...
    label: str  # nvidia-smi's number: "0"; a MIG device "0:1" (GPU 0's MIG device 1)
    name: str
    capability: tuple[int, int] | None = None  # CUDA compute capability (major, minor)
    parent: str = ""  # a MIG device: the UUID of its GPU
    legacy: str = ""  # a MIG device: MIG-GPU-<parent uuid>/<gi>/<ci> (drivers before R470)

    def describe(self) -> str:
        cc = f", compute capability {self.capability[0]}.{self.capability[1]}" \
            if self.capability else ""
        return f"{self.label} {self.name} ({self.uuid}{cc})"


@dataclass(frozen=True)
class Machine:
    """What NVML reports: every GPU by index, and what can be given out (whole GPUs not in
    MIG mode, and the MIG devices of those that are, as the device plugin's mixed
    strategy advertises them). `why` says why there are none."""

    gpus: tuple[Gpu, ...] = ()
    devices: tuple[Gpu, ...] = ()
    why: str = ""
    mig_mode: frozenset[str] = field(default_factory=frozenset)  # UUIDs of MIG-mode GPUs


@dataclass(frozen=True)
class View:
    """What kflab may give out here: the machine's devices narrowed by the user's
    CUDA_VISIBLE_DEVICES. `why` says why fewer than the machine has (or none); `error` is
    the refusal when the variable names a GPU wrongly."""

    devices: tuple[Gpu, ...]
    machine: Machine
    why: str = ""
    error: str = ""
    value: str | None = None  # the user's CUDA_VISIBLE_DEVICES, None when not theirs

    @property
    def ids(self) -> list[str]:
        return [g.uuid for g in self.devices]

    def check(self) -> list[str]:
        """The UUIDs, or the refusal (GpuError) when the variable is wrong."""
        if self.error:
            raise GpuError(self.error, hint=f"name GPUs that `nvidia-smi -L` lists, or unset "
                                            f"{VARIABLE} to let kflab use them all")
        return self.ids


# --- NVML ----------------------------------------------------------------------------------

def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _no_driver_here() -> bool:
    return not Path("/proc/driver/nvidia").exists()


def _nvml_failed(pynvml: Any, exc: Exception) -> str:
    code = getattr(exc, "value", None)
    if code == getattr(pynvml, "NVML_ERROR_LIBRARY_NOT_FOUND", -1):
        return "no NVIDIA driver here (NVML's library, libnvidia-ml, was not found)"
    if code == getattr(pynvml, "NVML_ERROR_DRIVER_NOT_LOADED", -1):
        return "the NVIDIA driver is not loaded (NVML: Driver Not Loaded)"
    return f"NVML could not list the GPUs: {exc}"


def _capability(pynvml: Any, handle: Any) -> tuple[int, int] | None:
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return int(major), int(minor)
    except pynvml.NVMLError:
        return None


def _mig_devices(pynvml: Any, handle: Any, gpu: Gpu) -> list[Gpu] | None:
    """The MIG devices of a GPU in MIG mode, or None for a GPU not in MIG mode."""
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # NotSupported: a GPU without MIG
        return None
    if current != getattr(pynvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return None
    out = []
    for slot in range(int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError:  # NotFound: an empty slot
            continue
        legacy = ""
        with contextlib.suppress(pynvml.NVMLError):
            legacy = (f"MIG-{gpu.uuid}/{pynvml.nvmlDeviceGetGpuInstanceId(mig)}/"
                      f"{pynvml.nvmlDeviceGetComputeInstanceId(mig)}")
        out.append(Gpu(_text(pynvml.nvmlDeviceGetUUID(mig)), f"{gpu.label}:{len(out)}",
                       _text(pynvml.nvmlDeviceGetName(mig)), gpu.capability, gpu.uuid,
                       legacy))
    return out


@functools.lru_cache(maxsize=1)
def machine() -> Machine:
    """The GPUs NVML reports (asked once per process: GPUs do not come and go while a
    command runs, and each NVML start costs time)."""
    try:
        import pynvml
    except ImportError:
        where = ("no NVIDIA driver here either" if _no_driver_here() else
                 "the NVIDIA driver is loaded, so this machine may well have GPUs")
        return Machine(why=f"nvidia-ml-py is not installed, so kflab cannot ask NVML which "
                           f"GPUs this machine has ({where}); it comes with kflab's `local` "
                           f"extra: {install_extras('local')}")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return Machine(why=_nvml_failed(pynvml, exc))
    try:
        gpus, devices, mig = [], [], set()
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu = Gpu(_text(pynvml.nvmlDeviceGetUUID(handle)), str(index),
                      _text(pynvml.nvmlDeviceGetName(handle)), _capability(pynvml, handle))
            gpus.append(gpu)
            parts = _mig_devices(pynvml, handle, gpu)
            if parts is None:
                devices.append(gpu)
            else:
                mig.add(gpu.uuid)
                devices += parts
    except pynvml.NVMLError as exc:
        return Machine(why=_nvml_failed(pynvml, exc))
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    why = "" if devices else ("the NVIDIA driver lists no GPU" if not gpus else
                              "every GPU is in MIG mode with no MIG device made")
    return Machine(tuple(gpus), tuple(devices), why, frozenset(mig))


# --- CUDA_VISIBLE_DEVICES --------------------------------------------------------------------

_STRTOUL = re.compile(r"^[+-]?\d+")


def _strtoul(entry: str) -> int | None:
    """What CUDA takes from an index entry: the leading (signed) digits, None without."""
    m = _STRTOUL.match(entry)
    return int(m.group()) if m else None


def _by_prefix(entry: str, candidates: list[tuple[str, Gpu]]) -> list[Gpu]:
    return list({g.uuid: g for key, g in candidates if key.startswith(entry)}.values())


def _listing(m: Machine) -> str:
    """`0=GPU-8932f937, 1=GPU-5e3fa2b1`: nvidia-smi's numbers and the start of each UUID."""
    return ", ".join(f"{g.label}={g.uuid[:12]}" for g in m.devices) if m.devices else "none"


def parse(value: str, m: Machine) -> View:
    """The devices `CUDA_VISIBLE_DEVICES=value` names on machine `m` (see the module text)."""
    raw = value.strip()
    if not raw or raw in NO_GPU_WORDS:
        return View((), m, f"{VARIABLE}={value!r} hides every GPU", value=value)
    entries = [e.strip() for e in raw.split(",")]
    kind = "mig" if entries[0].startswith("MIG-") else \
        "uuid" if entries[0].startswith("GPU-") else "index"
    by_index = {g.label: g for g in m.gpus}
    uuids = [(g.uuid, g) for g in m.devices]
    migs = [(g.uuid, g) for g in m.devices if g.parent] + \
        [(g.legacy, g) for g in m.devices if g.legacy]
    seen: list[Gpu] = []
    why = ""

    def refuse(entry: str, reason: str) -> View:
        return View((), m, error=f"{VARIABLE}={value}: {entry!r} {reason} (GPUs here: "
                                 f"{_listing(m)})", value=value)

    for entry in entries:
        if kind == "index":
            n = _strtoul(entry)
            if n is None:
                return refuse(entry, "is not a GPU index, and CUDA reads a list of "
                                     "indices only: it would hide this GPU and the rest")
            if n < 0:  # ends the list on purpose (CUDA's documented `0,2,-1,1`)
                why = f"{VARIABLE}={value} ends at {entry!r}"
                break
            gpu = by_index.get(str(n))
            if gpu is None:
                return refuse(entry, "names no GPU on this machine")
            if gpu.uuid in m.mig_mode:
                return refuse(entry, f"names GPU {n}, which is split into MIG devices: "
                                     f"name one of them (MIG-...)")
        else:
            prefix = "MIG-" if kind == "mig" else "GPU-"
            if not entry.startswith(prefix):
                return refuse(entry, f"is not a {prefix}... id, and CUDA reads a list of one "
                                     f"kind only (it would hide this GPU and the rest)")
            found = _by_prefix(entry, migs if kind == "mig" else uuids)
            split = _by_prefix(entry, [(g.uuid, g) for g in m.gpus if g.uuid in m.mig_mode])
            if not found and split and kind == "uuid":
                return refuse(entry, f"names GPU {split[0].label}, which is split into MIG "
                                     f"devices: name one of them (MIG-...)")
            if not found:
                return refuse(entry, "names no GPU on this machine")
            if len(found) > 1:
                return refuse(entry, f"is the start of {len(found)} GPUs' ids: give enough "
                                     f"of it to name one")
            gpu = found[0]
        if gpu in seen:
            return refuse(entry, f"names GPU {gpu.label} a second time (CUDA would then show "
                                 f"no GPU at all)")
        seen.append(gpu)
    if not why and len(seen) < len(m.devices):
        why = f"{VARIABLE}={value} leaves {len(m.devices) - len(seen)} of this machine's " \
              f"{len(m.devices)} out"
    return View(tuple(seen), m, why, value=value)


def user_value(environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The user's CUDA_VISIBLE_DEVICES, or None when unset or set by kflab for a workload
    (a command run inside a notebook or a replica sees the machine, as the module says)."""
    value = environ.get(VARIABLE)
    if value is None or (GIVEN in environ and environ[GIVEN] == value):
        return None
    return value


def view(environ: dict[str, str] | None = None) -> View:
    """The devices kflab may give out here (see the module text)."""
    m = machine()
    value = user_value(os.environ if environ is None else environ)
    if value is None:
        return View(m.devices, m, m.why)
    if not m.devices:
        # Nothing to resolve the ids against; the variable cannot add GPUs.
        return View((), m, m.why, value=value)
    return parse(value, m)


def given(ids: list[str]) -> dict[str, str]:
    """The variables a workload kflab starts gets for its GPUs (none: an empty list)."""
    value = ",".join(ids)
    return {VARIABLE: value, GIVEN: value}


def label(uuid: str) -> str:
    """nvidia-smi's number for a UUID ("0", a MIG device "0:1"), the UUID when unknown."""
    for gpu in machine().devices:
        if gpu.uuid == uuid:
            return gpu.label
    return uuid


def capability_short(devices: tuple[Gpu, ...] | list[Gpu],
                     need: tuple[int, int]) -> list[Gpu]:
    """The devices whose compute capability is below `need` (unknown counts as below)."""
    return [g for g in devices if g.capability is None or g.capability < need]
