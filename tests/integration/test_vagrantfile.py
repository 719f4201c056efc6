"""Rendered Vagrantfiles, read by the real `vagrant validate` (Debian's vagrant 2.3.4 +
vagrant-libvirt, installed by scripts/standins/30-vagrant.sh), for both Vagrant providers,
with and without a GPU; plus what a reviewer checks by eye: loopback-only ports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import config
from lab.providers.vagrant import VagrantProvider, render

# VirtualBox itself cannot run here: a stand-in VBoxManage answers vagrant's version probe.
STANDIN_BIN = Path(__file__).resolve().parents[1] / "fixtures" / "standin-bin"

pytestmark = pytest.mark.skipif(shutil.which("vagrant") is None,
                                reason="vagrant not installed (scripts/standins/30-vagrant.sh)")


def validate(tmp_path: Path, text: str, provider: str) -> subprocess.CompletedProcess[str]:
    d = tmp_path / provider
    d.mkdir(exist_ok=True)
    (d / "Vagrantfile").write_text(text)
    env = {**os.environ, "VAGRANT_DEFAULT_PROVIDER": provider.removeprefix("vagrant-"),
           "VAGRANT_EXPERIMENTAL": "disks", "VAGRANT_NO_COLOR": "1"}
    if provider == "vagrant-virtualbox" and shutil.which("VBoxManage") is None:
        env["PATH"] = f"{STANDIN_BIN}{os.pathsep}{env['PATH']}"
    return subprocess.run(["vagrant", "validate"], cwd=d, env=env, capture_output=True,
                          text=True, timeout=120)


PROFILES = {
    "virtualbox": "provider: vagrant-virtualbox\ngpu: off\n",
    "virtualbox-auto": "provider: vagrant-virtualbox\nname: vb\ncpus: 2\nmemory: 6\n"
                       "box: bento/ubuntu-24.04\nbox_version: '202502.21.0'\n",
    "libvirt": "provider: vagrant-libvirt\n",
    "libvirt-user-net": "provider: vagrant-libvirt\nvagrant: {network: user, libvirt_driver: "
                        "qemu, cpu_model: qemu64, isolated: true, ssh_port: 2299}\n",
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_rendered_vagrantfile_validates(tmp_path: Path, name: str) -> None:
    profile = config.parse(PROFILES[name], f"{name}.yaml")
    text = render(profile)
    res = validate(tmp_path, text, profile.provider)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "validated successfully" in res.stdout
    # Every forwarded port is on loopback, and nothing else is exposed.
    for m in re.finditer(r"forwarded_port.*?(?=\n  \S|\n\s*config|\Z)", text, re.S):
        assert 'host_ip: "127.0.0.1"' in m.group(0)
    for fwd in re.findall(r"hostfwd=tcp:([^:]*):", text):
        assert fwd == "127.0.0.1"
    assert "synced_folder \".\", \"/vagrant\", disabled: true" in text


def test_gpu_vagrantfile_validates(tmp_path: Path) -> None:
    """A GPU (display + audio function) passed through, on both libvirt networks."""
    for net in ("managed", "user"):
        profile = config.parse(f"provider: vagrant-libvirt\nvagrant: {{network: {net}}}\n")
        text = render(profile, ["0000:01:00.0", "0000:01:00.1"])
        assert 'lv.pci domain: "0x0000", bus: "0x01", slot: "0x00", function: "0x1"' in text
        assert 'lv.machine_type = "q35"' in text
        (tmp_path / net).mkdir()
        res = validate(tmp_path / net, text, "vagrant-libvirt")
        assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(("provider", "line"), [
    ("vagrant-libvirt", 'lv.graphics_type = "none"'), ("vagrant-virtualbox", "vb.gui = false")])
def test_validate_catches_a_broken_vagrantfile(tmp_path: Path, provider: str, line: str) -> None:
    """Negative control: vagrant validate does reject an unknown provider option."""
    var = line.split(".")[0]
    text = render(config.Profile(provider=provider)).replace(line, f"{var}.no_such_option = 1")
    res = validate(tmp_path, text, provider)
    assert res.returncode != 0
    assert "no_such_option" in res.stdout + res.stderr


def test_ruby_strings_are_escaped(tmp_path: Path) -> None:
    """Values reach Ruby only as escaped literals: no interpolation of #{...}."""
    from lab.providers.vagrant import _rb

    assert _rb('a"#{`id`}') == '"a\\"\\#{`id`}"'
    prov = VagrantProvider(config.Profile(provider="vagrant-libvirt", name="x1"), tmp_path)
    path = prov.write_vagrantfile([])
    assert path.read_text() == render(config.Profile(provider="vagrant-libvirt", name="x1"))
    assert prov.status().state in ("absent", "unknown", "running", "stopped")
