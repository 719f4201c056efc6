"""The training backend finds GPUs through NVML (nvidia-ml-py): on a real NVIDIA host it must
count what nvidia-smi lists (skips elsewhere)."""

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
    assert visible_gpus({}) == [str(i) for i in range(len(listed))]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0"}) == ["0"]
