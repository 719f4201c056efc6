"""Defect 11: a lab whose provider tool (Vagrant) is missing. Every cluster command answers
in one line, never a traceback, and `kflab down --destroy --force` always forgets the lab.

The commands run as real child processes with a PATH that holds no `vagrant` (only the
VirtualBox stand-in from tests/fixtures/standin-bin), as on a new user's machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab import config, lifecycle
from lab.providers import get_provider
from tests.conftest import REPO, run_kflab

STANDINS = REPO / "tests" / "fixtures" / "standin-bin"


@pytest.fixture
def bare_path(tmp_path: Path) -> str:
    """A PATH without vagrant, virsh or sudo: a folder holding only the VBoxManage stand-in."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(STANDINS / "VBoxManage", bindir / "VBoxManage")
    return str(bindir)


def _profile(tmp_path: Path, provider: str) -> Path:
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: {provider}\nname: novag\ngpu: off\n")
    return prof


def _one_error_line(res) -> str:
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("provider", ["vagrant-libvirt", "vagrant-virtualbox"])
def test_cluster_commands_without_vagrant(tmp_path: Path, bare_path: str, provider: str) -> None:
    state = tmp_path / "state"
    prof = _profile(tmp_path, provider)
    env = {"PATH": bare_path, "KFLAB_STATE": str(state)}

    # `kflab up --force --only node` (the path kflab suggests) stops before recording a lab
    res = run_kflab("up", "--force", "--only", "node", "-p", str(prof), env=env, timeout=120)
    assert res.returncode == 2
    line = _one_error_line(res)
    assert line.startswith("error: vagrant is not installed") and "install Vagrant" in line
    assert "kflab down --destroy --force" in line
    assert not list(state.glob("labs/*/lab.json"))

    # the state the issue reported: a record and a Vagrantfile from an earlier run (Vagrant
    # since removed, or an older kflab that recorded the lab before failing)
    profile = config.load(prof)
    lifecycle.record(state, profile, phase="create", ok=False)
    get_provider(profile, state).write_vagrantfile([])
    record = state / "labs" / "novag" / "lab.json"

    for cmd in (["status"], ["status", "--json"], ["down"], ["down", "--destroy"], ["ssh"]):
        res = run_kflab(*cmd, env=env, timeout=120)
        assert res.returncode == 2, (cmd, res.stdout, res.stderr)
        line = _one_error_line(res)
        assert f"lab 'novag' runs on {provider}" in line, cmd
        assert record.exists(), cmd  # refused: nothing forgotten without --force

    res = run_kflab("down", "--destroy", "--force", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert "lab forgotten" in res.stdout and "vagrant destroy" in res.stdout
    assert not record.exists()
    res = run_kflab("status", env=env, timeout=120)
    assert res.returncode == 2 and "no lab here yet" in res.stderr


def test_destroy_force_forgets_a_broken_record(tmp_path: Path, bare_path: str) -> None:
    """A record that no longer validates (edited by hand, older format) is still removable."""
    state = tmp_path / "state"
    record = state / "labs" / "odd" / "lab.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"profile": {"provider": "vagrant-libvirt", "cpu": 3}}))
    env = {"PATH": bare_path, "KFLAB_STATE": str(state)}
    res = run_kflab("down", "--destroy", env=env, timeout=120)
    assert res.returncode == 2 and "unknown field" in res.stderr and record.exists()
    res = run_kflab("down", "--destroy", "--force", env=env, timeout=120)
    assert res.returncode == 0 and "lab forgotten" in res.stdout and not record.exists()


def test_doctor_for_host_never_mentions_vagrant(tmp_path: Path, bare_path: str) -> None:
    res = run_kflab("doctor", "--provider", "host", "--json", cwd=tmp_path,
                    env={"PATH": bare_path}, timeout=120)
    assert "Traceback" not in res.stderr
    rows = json.loads(res.stdout)
    assert not any("vagrant" in json.dumps(r).lower() for r in rows)


def test_up_preflight_passes_gpu_auto_on_a_cpu_only_libvirt_host(tmp_path: Path) -> None:
    """`kflab up` runs the doctor first: gpu auto without a GPU (and IOMMU off) must not stop
    it (the stand-in host tree of tests/unit/test_doctor.py)."""
    from tests.unit.test_doctor import fake_host

    host = fake_host(tmp_path, iommu=False, tools=("vagrant", "virsh"))
    profile = config.parse("provider: vagrant-libvirt\ngpu: auto\ndisk: 20\n")
    lifecycle.preflight(profile, host)  # raises on any failing row
