"""The VM's NVIDIA driver is pinned by branch (manifests/versions.yaml), not by one Debian
build: the gpu role installs the newest build of the branch that apt offers and stops,
naming what apt offers, when the branch is gone. The pick runs here through Ansible itself
(tasks/driver_pick.yml) on `apt-cache madison` lines as Debian's archive prints them; the
real archive is used by tests/integration/test_roles_host.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

ROLES = REPO / "playbooks" / "roles"
MADISON = [
    "nvidia-driver | 550.163.01-2~bpo12+1 | http://deb.debian.org/debian bookworm-backports/non-free amd64 Packages",  # noqa: E501
    "nvidia-driver | 535.261.03-1~deb12u1 | http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages",  # noqa: E501
    "nvidia-driver | 535.247.01-1~deb12u1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages",  # noqa: E501
]


def test_versions_pin_branches_not_builds() -> None:
    doc = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    branches = doc["packages"]["nvidia-driver"]
    assert branches and all(str(b).isdigit() for b in branches.values()), branches


def _pick(tmp_path: Path, *branches: str) -> subprocess.CompletedProcess[str]:
    """One ansible-playbook run, a play per branch (each prints what it picked)."""
    book = tmp_path / "pick.yml"
    book.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": True, "gather_subset": ["!all"],
        "connection": "local",
        "vars": {"gpu_driver_branch": branch, "kflab_versions_file": "versions.yaml",
                 "ansible_python_interpreter": sys.executable,
                 "gpu_driver_madison": {"stdout_lines": MADISON}},
        "tasks": [{"ansible.builtin.include_role": {"name": "gpu",
                                                    "tasks_from": "driver_pick"}},
                  {"ansible.builtin.debug": {"msg": "PICKED={{ gpu_driver_branch }}:"
                                                    "{{ gpu_driver_version }}"}}]}
        for branch in branches]))
    exe = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run([str(exe), "-i", "localhost,", str(book)], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={"ANSIBLE_ROLES_PATH": str(ROLES), "PATH": "/usr/bin:/bin",
                               "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
                               "HOME": str(tmp_path), "ANSIBLE_NOCOLOR": "1"})


def test_the_newest_build_of_the_branch_is_installed(tmp_path: Path) -> None:
    res = _pick(tmp_path, "535", "550")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "PICKED=535:535.261.03-1~deb12u1" in res.stdout
    assert "PICKED=550:550.163.01-2~bpo12+1" in res.stdout


def test_a_branch_gone_from_the_archive_stops_naming_what_apt_offers(tmp_path: Path) -> None:
    res = _pick(tmp_path, "53")  # "53" must not match 535.x
    assert res.returncode != 0
    assert "no nvidia-driver of branch 53" in res.stdout
    assert "535.261.03-1~deb12u1" in res.stdout
