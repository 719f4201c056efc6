"""doctor against stand-in /proc and /sys trees (a fake host folder, named as such)."""

from __future__ import annotations

import os
from pathlib import Path

from lab.doctor import diagnose
from lab.doctor.linux import is_wsl
from lab.doctor.rows import Host, Needs

CPUINFO = "".join(f"processor\t: {i}\nflags\t\t: fpu vmx sse\n\n" for i in range(3))


def fake_host(tmp_path: Path, *, mem_kib: int = 32 * 1024 * 1024, gpu: bool = False,
              iommu: bool = True, wsl: bool = False, tools: tuple[str, ...] = (),
              free_gib: float = 500.0) -> Host:
    """A stand-in host tree: /proc and /sys files as the kernel would show them, and a disk
    with `free_gib` free (not this machine's, which varies)."""
    root = tmp_path / "host"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(CPUINFO)
    (root / "proc/meminfo").write_text(f"MemTotal:       {mem_kib} kB\n")
    (root / "proc/modules").write_text("vfio_pci 16384 0 - Live 0x0\n" if iommu else "")
    (root / "proc/sys/kernel/osrelease").write_text(
        "5.15.153.1-microsoft-standard-WSL2" if wsl else "6.1.0-26-amd64")
    (root / "dev").mkdir()
    (root / "dev/kvm").write_text("")
    if iommu:
        (root / "sys/kernel/iommu_groups/13").mkdir(parents=True)
    if gpu:
        dev = root / "sys/bus/pci/devices/0000:01:00.0"
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x10de\n")
        (dev / "class").write_text("0x030000\n")
        if iommu:
            os.symlink(root / "sys/kernel/iommu_groups/13", dev / "iommu_group")
    return Host(root=root, which=lambda name: f"/usr/bin/{name}" if name in tools else None,
                env={}, disk_free_gib=free_gib)


def rows(host: Host, **needs) -> dict:
    return {r.name: r for r in diagnose(Needs(**needs), host)}


def test_local_lab_on_a_small_host(tmp_path: Path) -> None:
    r = rows(fake_host(tmp_path, mem_kib=6 * 1024 * 1024))
    assert r["memory"].status == "pass"  # the local backend needs 4 GiB
    assert r["cpus"].observed == "3"
    assert r["virtualization"].status == "pass"
    assert r["vagrant"].status == "warn"  # only needed for a VM lab
    assert r["nvidia gpu"].status == "pass" and "CPU-only" in r["nvidia gpu"].observed


def test_vm_lab_needs_memory_and_vagrant(tmp_path: Path) -> None:
    r = rows(fake_host(tmp_path, mem_kib=6 * 1024 * 1024), provider="vagrant-libvirt")
    assert r["memory"].status == "fail" and "10 GiB" in r["memory"].advice
    assert r["vagrant"].status == "fail"
    ok = rows(fake_host(tmp_path / "b", tools=("vagrant", "virsh")), provider="vagrant-libvirt")
    assert ok["vagrant"].status == "pass" and ok["vm providers"].status == "pass"


def test_disk_need_follows_the_lab(tmp_path: Path) -> None:
    """A VM lab needs its disk size free; the local backend only 5 GiB."""
    vm = rows(fake_host(tmp_path, free_gib=30.0), provider="vagrant-libvirt")["disk"]
    assert (vm.status, vm.observed, vm.advice) == ("fail", "30 GiB free", "free at least 40 GiB")
    small = rows(fake_host(tmp_path / "b", free_gib=30.0), provider="vagrant-libvirt",
                 disk_gib=20.0)["disk"]
    assert small.status == "pass" and small.advice == ""
    local = rows(fake_host(tmp_path / "c", free_gib=6.0))["disk"]
    assert local.status == "pass"
    assert Host(root=tmp_path).free_gib() > 0  # unset: measured on the real disk


def test_gpu_passthrough_needs_iommu(tmp_path: Path) -> None:
    good = rows(fake_host(tmp_path, gpu=True, tools=("vagrant", "virsh")),
                provider="vagrant-libvirt")
    assert good["iommu"].status == "pass" and "0000:01:00.0: group 13" in good["iommu"].observed
    assert good["nvidia gpu"].status == "warn"  # a device, but no driver on the host
    # gpu: auto passes only GPUs bound to vfio-pci: without IOMMU the lab is CPU-only (warn)
    auto = rows(fake_host(tmp_path / "b", gpu=True, iommu=False, tools=("vagrant", "virsh")),
                provider="vagrant-libvirt")
    assert auto["iommu"].status == "warn" and "intel_iommu=on" in auto["iommu"].advice
    assert "CPU-only" in auto["iommu"].advice
    # a GPU named in lab.yaml must be passed through: without IOMMU that fails
    named = rows(fake_host(tmp_path / "c", gpu=True, iommu=False, tools=("vagrant", "virsh")),
                 provider="vagrant-libvirt", gpu="pci", gpu_pci=("0000:01:00.0",))
    assert named["iommu"].status == "fail" and "intel_iommu=on" in named["iommu"].advice


def test_wsl_detection(tmp_path: Path) -> None:
    host = fake_host(tmp_path, wsl=True)
    assert is_wsl(host)
    assert rows(host, provider="wsl2")["wsl"].status == "pass"
    assert rows(fake_host(tmp_path / "b"), provider="wsl2")["wsl"].status == "fail"


def test_gpu_auto_without_a_gpu_passes_iommu(tmp_path: Path) -> None:
    """Defect 11: `gpu: auto` on a host without an NVIDIA GPU (and without IOMMU) is a
    CPU-only libvirt lab: no IOMMU failure ("set gpu: off") may block `kflab up`."""
    r = rows(fake_host(tmp_path, iommu=False, tools=("vagrant", "virsh")),
             provider="vagrant-libvirt", gpu="auto")
    assert r["nvidia gpu"].status == "pass"
    assert r["iommu"].status == "pass" and "CPU-only" in r["iommu"].observed
    assert not [x for x in r.values() if x.status == "fail"]


def test_no_kvm_names_the_qemu_fallback(tmp_path: Path) -> None:
    """Without /dev/kvm a VM lab fails the row, and the advice names the documented qemu
    (software emulation) fallback; with that fallback set it is only a warning."""
    host = fake_host(tmp_path, tools=("vagrant", "virsh"))
    (host.root / "dev/kvm").unlink()
    r = rows(host, provider="vagrant-libvirt")
    assert r["virtualization"].status == "fail"
    assert "libvirt_driver: qemu" in r["virtualization"].advice
    assert "docs/install.md" in r["virtualization"].advice
    emulated = rows(host, provider="vagrant-libvirt", software_vm=True)
    assert emulated["virtualization"].status == "warn"
    local = rows(host)  # the local backend needs no VM: a warning that still names the way
    assert local["virtualization"].status == "warn"
    assert "libvirt_driver: qemu" in local["virtualization"].advice


def test_host_provider_never_asks_for_vagrant(tmp_path: Path) -> None:
    """--provider host provisions this machine: no Vagrant, no hypervisor, no KVM needed."""
    host = fake_host(tmp_path)
    (host.root / "dev/kvm").unlink()
    for provider in ("host", "wsl2", "existing"):
        r = rows(host, provider=provider)
        assert "vagrant" not in r and "vm providers" not in r
        assert r["virtualization"].status == "pass"
        assert not any("vagrant" in (x.advice + x.observed).lower() for x in r.values())


def test_dev_kvm_is_enough_without_the_cpu_flag(tmp_path: Path) -> None:
    """A VM with nested KVM may hide vmx/svm from /proc/cpuinfo yet give /dev/kvm, which is
    what libvirt uses: the row passes (it warned "cpu flag none, /dev/kvm present" and
    advised the firmware). With the flag but no /dev/kvm, the advice is to load the module."""
    host = fake_host(tmp_path, tools=("vagrant", "virsh"))
    (host.root / "proc/cpuinfo").write_text(
        (host.root / "proc/cpuinfo").read_text().replace(" vmx", "").replace(" svm", ""))
    assert rows(host, provider="vagrant-libvirt")["virtualization"].status == "pass"
    assert rows(host)["virtualization"].status == "pass"
    (host.root / "proc/cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vmx sse\n")
    (host.root / "dev/kvm").unlink()
    row = rows(host, provider="vagrant-libvirt")["virtualization"]
    assert row.status == "fail" and "sudo modprobe kvm_intel" in row.advice, row


def test_doctor_says_ready_or_what_is_not(kflab) -> None:
    """The first line says the verdict: `ready`, `ready, with warnings` or `not ready: ROW`."""
    import json

    first = kflab("doctor").stdout.splitlines()[0]
    found = json.loads(kflab("doctor", "--json").stdout)
    failed = [r["name"] for r in found if r["status"] == "fail"]
    warned = any(r["status"] == "warn" for r in found)
    want = (f"not ready: {', '.join(failed)}" if failed else
            "ready, with warnings" if warned else "ready")
    assert first == f"kflab doctor (local: {want})", (first, found)
