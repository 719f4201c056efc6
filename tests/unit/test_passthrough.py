"""libvirt GPU passthrough: the doctor's IOMMU/VFIO rows and the provider's choice of PCI
functions, against a stand-in /sys tree (Host takes a root folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab import config, doctor
from lab.config import Profile
from lab.doctor import linux as doctor_linux
from lab.doctor.rows import Host, Needs
from lab.errors import LabError
from lab.providers.vagrant import passthrough_devices, render


def _pci(root: Path, addr: str, vendor: str, klass: str, device: str, group: str,
         driver: str | None) -> None:
    dev = root / "sys/bus/pci/devices" / addr
    dev.mkdir(parents=True, exist_ok=True)
    (dev / "vendor").write_text(vendor + "\n")
    (dev / "class").write_text(klass + "\n")
    (dev / "device").write_text(device + "\n")
    gdir = root / "sys/kernel/iommu_groups" / group / "devices"
    gdir.mkdir(parents=True, exist_ok=True)
    (gdir / addr).mkdir(exist_ok=True)
    os.symlink(f"../../../kernel/iommu_groups/{group}", dev / "iommu_group")
    if driver:
        drv = root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../bus/pci/drivers/{driver}", dev / "driver")


def gpu_host(tmp_path: Path, audio_driver: str | None = "vfio-pci") -> Host:
    _pci(tmp_path, "0000:01:00.0", "0x10de", "0x030000", "0x2684", "14", "vfio-pci")
    _pci(tmp_path, "0000:01:00.1", "0x10de", "0x040300", "0x22ba", "14", audio_driver)
    (tmp_path / "sys/module/vfio_pci").mkdir(parents=True)
    return Host(root=tmp_path, which=lambda n: None, env={})


def test_passthrough_rows_pass_when_group_bound_to_vfio(tmp_path: Path) -> None:
    host = gpu_host(tmp_path)
    rows = doctor_linux.passthrough_rows(Needs(provider="vagrant-libvirt"), host)
    assert [(r.name, r.status) for r in rows] == [("gpu 0000:01:00.0", "pass")]
    every = {r.name: r for r in doctor.diagnose(Needs(provider="vagrant-libvirt"), host)}
    assert every["iommu"].status == "pass" and every["gpu 0000:01:00.0"].status == "pass"
    assert doctor_linux.iommu_siblings(host, "0000:01:00.0") == ["0000:01:00.0", "0000:01:00.1"]


def test_passthrough_rows_fail_when_audio_function_still_on_host_driver(tmp_path: Path) -> None:
    host = gpu_host(tmp_path, audio_driver="snd_hda_intel")
    needs = Needs(provider="vagrant-libvirt", gpu="pci", gpu_pci=("0000:01:00.0",))
    row = {r.name: r for r in doctor.diagnose(needs, host)}["gpu 0000:01:00.0"]
    assert row.status == "fail"
    assert "0000:01:00.1=snd_hda_intel" in row.observed
    assert "vfio-pci.ids=10de:2684,10de:22ba" in row.advice


def test_passthrough_rows_without_iommu(tmp_path: Path) -> None:
    dev = tmp_path / "sys/bus/pci/devices/0000:01:00.0"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    (dev / "class").write_text("0x030000\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1\n")
    rows = {r.name: r for r in doctor.diagnose(
        Needs(provider="vagrant-libvirt", gpu="pci", gpu_pci=("0000:01:00.0",)),
        Host(root=tmp_path, which=lambda n: None, env={}))}
    assert rows["iommu"].status == "fail" and "intel_iommu=on" in rows["iommu"].advice
    assert rows["gpu 0000:01:00.0"].status == "fail"  # not bound to vfio-pci
    assert rows["nvidia gpu"].status == "warn"  # no host driver: expected for passthrough


def test_needs_from_profile() -> None:
    p = Profile(provider="vagrant-libvirt", cpus=8, memory=16, gpu=("0000:01:00.0",))
    n = Needs.from_profile(p)
    assert (n.cpus, n.memory_gib, n.gpu_pci, n.provider) == (8, 16.0, ("0000:01:00.0",),
                                                             "vagrant-libvirt")


def test_passthrough_devices_take_the_whole_group(tmp_path: Path) -> None:
    host = gpu_host(tmp_path / "root")
    profile = config.parse("provider: vagrant-libvirt\n")
    assert passthrough_devices(profile, host) == ["0000:01:00.0", "0000:01:00.1"]
    assert passthrough_devices(config.parse("provider: vagrant-libvirt\ngpu: off\n"), host) == []


def test_explicit_gpu_refused_when_not_bound_to_vfio(tmp_path: Path) -> None:
    host = gpu_host(tmp_path / "root", audio_driver="snd_hda_intel")
    profile = config.parse("provider: vagrant-libvirt\ngpu: ['0000:01:00.0']\n")
    with pytest.raises(LabError, match="GPU passthrough is not ready") as err:
        passthrough_devices(profile, host)
    assert "vfio-pci.ids=" in str(err.value)


def test_virtualbox_refuses_gpu_passthrough() -> None:
    with pytest.raises(LabError, match="VirtualBox") as err:
        render(config.Profile(provider="vagrant-virtualbox"), ["0000:01:00.0"])
    assert "vagrant-libvirt" in str(err.value) and "wsl2" in str(err.value)


