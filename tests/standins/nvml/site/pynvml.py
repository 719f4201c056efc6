"""MOCK of nvidia-ml-py's `pynvml` -- not NVIDIA's code, and no GPU behind it.

NVIDIA GPUs and their driver cannot exist on the machines that run kflab's tests without a
GPU, so these tests put this module first on the import path (tests/standins/nvml) in place
of the real one. It answers the few NVML calls kflab makes (lab/backends/local/
gpu_devices.py) with the machine described by the JSON in KFLAB_MOCK_NVML, read at each
nvmlInit():

    {"gpus": [{"uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3", "cc": [9, 0],
               "mig": [{"uuid": "MIG-...", "gi": 1, "ci": 0}]}],
     "init_error": 12}

`mig` (a list, possibly empty) puts the GPU in MIG mode; `init_error` makes nvmlInit fail
with that NVML return code (12: library not found, 9: driver not loaded). Return values
and error codes follow nvidia-ml-py 13 (pynvml.py): strings for names and UUIDs,
NVMLError(value) with NVML_ERROR_* codes, [current, pending] from nvmlDeviceGetMigMode.
tests/gpu runs the same code against the real library on real GPUs.
"""

from __future__ import annotations

import json
import os

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_NOT_FOUND = 6
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
MOCK = True  # lets a test assert that this module, not NVIDIA's, was imported

_STRINGS = {NVML_ERROR_UNINITIALIZED: "Uninitialized",
            NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
            NVML_ERROR_NOT_SUPPORTED: "Not Supported",
            NVML_ERROR_NOT_FOUND: "Not Found",
            NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
            NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found"}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _STRINGS.get(self.value, f"Unknown Error {self.value}")


_machine: dict | None = None
inits = 0  # how many times nvmlInit ran in this process (the cache test reads it)


def _gpus() -> list[dict]:
    if _machine is None:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return list(_machine.get("gpus") or [])


def nvmlInit() -> None:
    global _machine, inits
    inits += 1
    spec = json.loads(os.environ.get("KFLAB_MOCK_NVML") or '{"gpus": []}')
    if spec.get("init_error"):
        raise NVMLError(int(spec["init_error"]))
    _machine = spec


def nvmlShutdown() -> None:
    global _machine
    _machine = None


def nvmlDeviceGetCount() -> int:
    return len(_gpus())


def nvmlDeviceGetHandleByIndex(index: int) -> tuple:
    gpus = _gpus()
    if not 0 <= index < len(gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return ("gpu", index)


def _spec(handle: tuple) -> dict:
    gpu = _gpus()[handle[1]]
    return gpu if handle[0] == "gpu" else gpu["mig"][handle[2]]


def nvmlDeviceGetUUID(handle: tuple) -> str:
    return str(_spec(handle)["uuid"])


def nvmlDeviceGetName(handle: tuple) -> str:
    gpu = _gpus()[handle[1]]
    name = str(gpu.get("name", "NVIDIA H100 80GB HBM3"))
    return name if handle[0] == "gpu" else f"{name} MIG {handle[2]}"


def nvmlDeviceGetCudaComputeCapability(handle: tuple) -> tuple[int, int]:
    major, minor = _gpus()[handle[1]].get("cc", [9, 0])
    return int(major), int(minor)


def nvmlDeviceGetMigMode(handle: tuple) -> list[int]:
    gpu = _gpus()[handle[1]]
    if "mig" not in gpu:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [NVML_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE]


def nvmlDeviceGetMaxMigDeviceCount(handle: tuple) -> int:
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(handle: tuple, index: int) -> tuple:
    migs = _gpus()[handle[1]].get("mig") or []
    if index >= len(migs):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return ("mig", handle[1], index)


def nvmlDeviceGetGpuInstanceId(handle: tuple) -> int:
    return int(_spec(handle).get("gi", 0))


def nvmlDeviceGetComputeInstanceId(handle: tuple) -> int:
    return int(_spec(handle).get("ci", 0))
