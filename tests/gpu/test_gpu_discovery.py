"""The training backend finds GPUs through NVML (nvidia-ml-py): on a real NVIDIA host it must
list what nvidia-smi lists, by UUID (skips elsewhere)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from lab.backends.local.training.env import nvml_device_count, visible_gpus

pytestmark = pytest.mark.gpu


def test_nvml_counts_what_nvidia_smi_lists() -> None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        pytest.skip("no nvidia-smi on this machine")
    listed = [ln for ln in subprocess.run([smi, "-L"], capture_output=True, text=True,
                                          timeout=30, check=True).stdout.splitlines()
              if ln.startswith("GPU ")]
    assert listed, "nvidia-smi lists no GPU"
    assert nvml_device_count() == len(listed)
    uuids = [line.split("UUID: ", 1)[1].rstrip(")") for line in listed]
    assert visible_gpus({}) == uuids  # (no GPU here is in MIG mode)
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0"}) == uuids[:1]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": uuids[-1][:12]}) == uuids[-1:]
