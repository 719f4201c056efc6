"""`kflab doctor` on macOS, which cannot exist here: the platform seam (Host.system and
Host.machine) is faked as "Darwin", and `sysctl` is a stand-in script answering the two keys
doctor reads, as macOS would. Nothing of Linux (/proc, /sys) may be consulted."""

from __future__ import annotations

from pathlib import Path

from lab.doctor import diagnose
from lab.doctor.rows import GIB, Host, Needs

SYSCTL = """#!/bin/sh
# Stand-in for macOS sysctl (mocked: no macOS here).
case "$2" in
  hw.memsize) echo {mem} ;;
  kern.hv_support) echo {hv} ;;
  *) echo "sysctl: unknown oid '$2'" >&2; exit 1 ;;
esac
"""


def fake_mac(tmp_path: Path, machine: str = "arm64", *, mem_gib: int = 16, hv: int = 1,
             tools: tuple[str, ...] = ()) -> Host:
    """A Mac stand-in: an empty root (no /proc, no /sys) and a fake sysctl."""
    root = tmp_path / "mac"
    root.mkdir(parents=True)
    sysctl = tmp_path / "sysctl"
    sysctl.write_text(SYSCTL.format(mem=mem_gib * GIB, hv=hv))
    sysctl.chmod(0o755)

    def which(name: str) -> str | None:
        if name == "sysctl":
            return str(sysctl)
        return f"/usr/local/bin/{name}" if name in tools else None

    return Host(root=root, which=which, env={}, system="Darwin", machine=machine,
                disk_free_gib=500.0)


def rows(host: Host, **needs) -> dict:
    return {r.name: r for r in diagnose(Needs(**needs), host)}


def test_apple_silicon_local_backend(tmp_path: Path) -> None:
    r = rows(fake_mac(tmp_path))
    assert r["platform"].status == "pass"
    assert r["platform"].observed == "macOS, Apple silicon (arm64)"
    assert r["providers"].status == "pass"
    assert r["providers"].observed.startswith("apply: local, existing; not here: ")
    assert "vagrant-virtualbox (VirtualBox for Arm cannot run the lab's x86 box)" \
        in r["providers"].observed
    assert "vagrant-libvirt (Linux only, as is GPU passthrough)" in r["providers"].observed
    assert r["memory"].observed == "16.0 GiB" and r["memory"].status == "pass"  # from sysctl
    assert r["gpu"].status == "pass" and "CPU" in r["gpu"].observed
    assert not {"iommu", "wsl", "nvidia gpu", "virtualization"} & set(r)  # Linux/VM rows


def test_linux_only_providers_are_refused_with_what_applies(tmp_path: Path) -> None:
    for i, provider in enumerate(("vagrant-libvirt", "host", "wsl2")):
        r = rows(fake_mac(tmp_path / str(i)), provider=provider)
        assert r["providers"].status == "fail", provider
        assert r["providers"].advice.startswith(
            f"{provider} does not apply on macOS: use local or existing")


def test_apple_silicon_cannot_run_the_virtualbox_box(tmp_path: Path) -> None:
    r = rows(fake_mac(tmp_path, tools=("vagrant", "VBoxManage")), provider="vagrant-virtualbox")
    assert r["providers"].status == "fail" and "vagrant-virtualbox (VirtualBox for Arm" \
        in r["providers"].observed


def test_intel_mac_virtualbox_lab(tmp_path: Path) -> None:
    r = rows(fake_mac(tmp_path, "x86_64", tools=("vagrant", "VBoxManage")),
             provider="vagrant-virtualbox")
    assert r["platform"].observed == "macOS, Intel (x86_64)"
    assert r["providers"].status == "pass"
    assert r["providers"].observed.startswith("apply: local, existing, vagrant-virtualbox;")
    assert r["virtualization"].status == "pass"
    assert r["vagrant"].status == r["vboxmanage"].status == "pass"
    assert r["memory"].status == "pass"  # 16 GiB >= 8 + 2 for the VM
    bare = rows(fake_mac(tmp_path / "b", "x86_64", mem_gib=8, hv=0),
                provider="vagrant-virtualbox")
    assert bare["virtualization"].status == "fail"
    assert bare["vagrant"].status == bare["vboxmanage"].status == "fail"
    assert bare["memory"].status == "fail" and "10 GiB" in bare["memory"].advice


def test_gpu_passthrough_is_refused_on_a_mac(tmp_path: Path) -> None:
    r = rows(fake_mac(tmp_path, "x86_64"), provider="vagrant-virtualbox",
             gpu="pci", gpu_pci=("0000:01:00.0",))
    assert r["gpu"].status == "fail" and "vagrant-libvirt on Linux" in r["gpu"].advice
