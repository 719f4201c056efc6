"""The gpu role's detection on a real NVIDIA host (skips elsewhere): it must find the GPU and
the loaded driver and decide to enable GPUs. Only the detect step runs: the enable step
installs packages and needs k3s."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.integration.ansible_helpers import run_playbook

pytestmark = pytest.mark.gpu
PLAY = """
- name: GPU detection only
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The gpu role's detect step
      ansible.builtin.import_role:
        name: gpu
        tasks_from: detect
    - name: Report
      ansible.builtin.debug:
        msg: "gpu_enabled={{ gpu_enabled }} devices={{ gpu_pci.matched }}"
"""


def test_detects_gpu_and_driver(tmp_path: Path) -> None:
    if not Path("/proc/driver/nvidia/version").exists():
        pytest.skip("no NVIDIA driver loaded on this machine")
    (tmp_path / "play.yml").write_text(PLAY)
    result = run_playbook(tmp_path / "play.yml", "localhost,",
                          {"kflab_gpu": True, "ansible_python_interpreter": sys.executable},
                          tmp_path)
    assert result.rc == 0, result.output[-3000:]
    assert "gpu_enabled=True" in result.output, result.output[-3000:]
    assert "devices=0" not in result.output
