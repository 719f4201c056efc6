"""NVML stand-in for tests without a GPU: a MOCK `pynvml` (site/pynvml.py), because NVIDIA
GPUs and their driver cannot exist on the machines that run these tests.

`install(monkeypatch, gpus)` makes this process and every child it starts (PYTHONPATH) see
the machine described; `absent(monkeypatch)` makes `import pynvml` fail as it does without
nvidia-ml-py. Both give gpu_devices a fresh per-process cache for the test.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SITE, ABSENT = HERE / "site", HERE / "absent"


def uuid(i: int, head: str = "") -> str:
    """A UUID shaped as NVML writes them; `head` (8 hex digits) starts it."""
    return f"GPU-{head or f'{i:08x}'}-1111-2222-3333-{i:012x}"


def gpus(n: int, cc: tuple[int, int] = (9, 0), name: str = "NVIDIA H100 80GB HBM3") -> list[dict]:
    return [{"uuid": uuid(i), "name": name, "cc": list(cc)} for i in range(n)]


def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu_devices asks NVML once per process: give it a cache of its own for this test
    (the original, restored after it, never saw the mock)."""
    from lab.backends.local import gpu_devices

    monkeypatch.setattr(gpu_devices, "machine",
                        functools.lru_cache(maxsize=1)(gpu_devices.machine.__wrapped__))


def _path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and p not in (str(SITE), str(ABSENT))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *rest]))


def install(monkeypatch: pytest.MonkeyPatch, machine: list[dict] | dict[str, Any]) -> Any:
    """This process and its children see `machine` (a list of GPUs, or the whole spec)."""
    spec = {"gpus": machine} if isinstance(machine, list) else machine
    monkeypatch.setenv("KFLAB_MOCK_NVML", json.dumps(spec))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("KFLAB_GIVEN_GPUS", raising=False)
    _path(monkeypatch, SITE)
    loader = importlib.util.spec_from_file_location("pynvml", SITE / "pynvml.py")
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    _fresh_cache(monkeypatch)
    return module


def absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import pynvml` fails, here and in children, as without nvidia-ml-py."""
    monkeypatch.delenv("KFLAB_MOCK_NVML", raising=False)
    _path(monkeypatch, ABSENT)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # None in sys.modules: ImportError
    _fresh_cache(monkeypatch)
