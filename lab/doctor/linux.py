"""Host preflight on Linux (WSL 2 included): CPUs and memory from /proc, virtualization,
Vagrant and its hypervisors, WSL, NVIDIA GPUs and their IOMMU groups for passthrough, and the
provider's own needs (`host`: systemd and sudo; `wsl2`: WSL 2, systemd, CUDA on WSL).
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.doctor.rows import (
    GIB,
    Host,
    Needs,
    Row,
    container_engine_row,
    existing_rows,
    gpu_discovery_row,
    local_backend_row,
    sizing_rows,
)


def _meminfo_gib(host: Host) -> float:
    for line in host.read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / GIB
    return 0.0


def is_wsl(host: Host) -> bool:
    return "microsoft" in host.read("/proc/sys/kernel/osrelease").lower() or bool(
        host.env.get("WSL_DISTRO_NAME"))


def nvidia_gpus(host: Host) -> list[dict[str, str]]:
    """GPUs as nvidia-smi reports them (name, memory, PCI bus id); [] without a driver."""
    code, out = host.run(["nvidia-smi", "--query-gpu=name,memory.total,pci.bus_id",
                          "--format=csv,noheader"])
    if code != 0:
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            gpus.append({"name": parts[0], "memory": parts[1], "pci": parts[2]})
    return gpus


def nvidia_pci_devices(host: Host) -> list[str]:
    """PCI addresses of NVIDIA display devices from sysfs (vendor 0x10de, class 0x03xx)."""
    out = []
    base = host.root / "sys/bus/pci/devices"
    if not base.is_dir():
        return out
    for dev in sorted(base.iterdir()):
        vendor = host.read(f"/sys/bus/pci/devices/{dev.name}/vendor").strip()
        klass = host.read(f"/sys/bus/pci/devices/{dev.name}/class").strip()
        if vendor == "0x10de" and klass.startswith("0x03"):
            out.append(dev.name)
    return out


def iommu_group(host: Host, pci: str) -> str | None:
    link = host.root / f"sys/bus/pci/devices/{pci}/iommu_group"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def pci_driver(host: Host, pci: str) -> str:
    """The kernel driver bound to a PCI device ('' when none)."""
    link = host.root / f"sys/bus/pci/devices/{pci}/driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else ""


def iommu_siblings(host: Host, pci: str) -> list[str]:
    """Every device in `pci`'s IOMMU group (VFIO passes a group as a whole)."""
    group = iommu_group(host, pci)
    if group is None:
        return []
    members = host.root / f"sys/kernel/iommu_groups/{group}/devices"
    return sorted(d.name for d in members.iterdir()) if members.is_dir() else [pci]


def passthrough_rows(needs: Needs, host: Host) -> list[Row]:
    """libvirt GPU passthrough: each GPU's whole IOMMU group must be bound to vfio-pci."""
    wanted = list(needs.gpu_pci) or nvidia_pci_devices(host)
    if not wanted:
        return []
    rows = []  # IOMMU on and vfio-pci loaded: the iommu row (_iommu_row)
    for pci in wanted:
        if not host.exists(f"/sys/bus/pci/devices/{pci}"):
            rows.append(Row(f"gpu {pci}", "fail", "no such PCI device",
                            "list GPUs with `lspci -Dnn | grep -i nvidia` and fix `gpu`"))
            continue
        group = iommu_siblings(host, pci) or [pci]
        drivers = {d: pci_driver(host, d) for d in group}
        bad = {d: drv for d, drv in drivers.items() if drv not in ("vfio-pci", "")}
        ok = not bad and pci_driver(host, pci) == "vfio-pci"
        ids = ",".join(
            f"{host.read(f'/sys/bus/pci/devices/{d}/vendor').strip()[2:]}:"
            f"{host.read(f'/sys/bus/pci/devices/{d}/device').strip()[2:]}" for d in group)
        rows.append(Row(f"gpu {pci}", "pass" if ok else ("fail" if needs.gpu_pci else "warn"),
                        "group " + ", ".join(f"{d}={drv or 'none'}" for d, drv in
                                             drivers.items()),
                        "" if ok else f"bind the whole IOMMU group to vfio-pci: add "
                        f"vfio-pci.ids={ids} to the kernel command line (the host then "
                        "cannot use this GPU)"))
    return rows


def wsl_rows(host: Host) -> list[Row]:
    """WSL 2 (not 1), systemd as PID 1, and the CUDA-on-WSL libraries Windows mounts."""
    release = host.read("/proc/sys/kernel/osrelease").strip()
    wsl2 = "microsoft-standard" in release.lower() or "wsl2" in release.lower()
    rows = [Row("wsl version", "pass" if wsl2 else "fail", release or "unknown",
                "" if wsl2 else "k3s needs WSL 2: run `wsl --set-version <distro> 2` in "
                "PowerShell")]
    init = host.read("/proc/1/comm").strip()
    rows.append(Row("systemd", "pass" if init == "systemd" else "fail", f"PID 1 is {init or '?'}",
                    "" if init == "systemd" else "add `[boot]` `systemd=true` to /etc/wsl.conf, "
                    "then `wsl --shutdown` in PowerShell and reopen the distro"))
    lib = host.root / "usr/lib/wsl/lib"
    cuda = sorted(p.name for p in lib.glob("libcuda.so*")) if lib.is_dir() else []
    rows.append(Row("cuda on wsl", "pass" if cuda else "warn",
                    ", ".join(cuda[:2]) if cuda else "no /usr/lib/wsl/lib/libcuda.so",
                    "" if cuda else "for a GPU lab install the NVIDIA Windows driver (it "
                    "shares CUDA with WSL); do not install a Linux driver inside WSL"))
    return rows


def host_rows(host: Host) -> list[Row]:
    """Provisioning this machine itself: Linux with systemd and root via sudo."""
    init = host.read("/proc/1/comm").strip()
    rows = [Row("systemd", "pass" if init == "systemd" else "fail", f"PID 1 is {init or '?'}",
                "" if init == "systemd" else "k3s runs as a systemd service: use a systemd host")]
    root = os.geteuid() == 0 if host.root == Path("/") else False
    if root:
        rows.append(Row("sudo", "pass", "running as root"))
    else:
        code, _ = host.run(["sudo", "-n", "true"])
        rows.append(Row("sudo", "pass" if code == 0 else "warn",
                        "passwordless" if code == 0 else "needs a password" if code == 1
                        else "sudo not found",
                        "" if code == 0 else "run `sudo -v` first, or `kflab up "
                        "--ask-become-pass`"))
    return rows


def _iommu_row(host: Host, pci: list[str], needs: Needs) -> Row:
    """IOMMU matters only when a GPU will be passed through (libvirt + GPU); elsewhere, and
    with `gpu: auto` on a host with nothing to pass through, the row is information."""
    base = host.root / "sys/kernel/iommu_groups"
    groups = len(list(base.iterdir())) if base.is_dir() else 0
    per_gpu = {p: iommu_group(host, p) for p in pci}
    observed = f"{groups} groups" if groups else "disabled"
    if per_gpu:
        observed += "; " + ", ".join(f"{p}: group {g or '-'}" for p, g in per_gpu.items())
    vfio = "vfio_pci" in host.read("/proc/modules") or host.exists("/sys/bus/pci/drivers/vfio-pci")
    ok = bool(groups) and all(per_gpu.values())
    explicit = bool(needs.gpu_pci)
    if needs.provider != "vagrant-libvirt" or needs.gpu == "off":
        return Row("iommu", "pass", observed)
    if not pci and not explicit:  # gpu: auto, no NVIDIA device: a CPU-only lab, no passthrough
        return Row("iommu", "pass", observed + "; no NVIDIA GPU to pass through (CPU-only lab)")
    if not ok:
        return Row("iommu", "fail" if explicit else "warn", observed,
                   "enable intel_iommu=on or amd_iommu=on (kernel command line) and VT-d/AMD-Vi"
                   + ("" if explicit else "; until then gpu: auto gives a CPU-only lab"))
    if not vfio:
        return Row("iommu", "warn", observed + "; vfio-pci not loaded",
                   "modprobe vfio-pci and bind the GPU to it (docs/install.md)")
    return Row("iommu", "pass", observed + "; vfio-pci loaded")


def _virtualization_row(host: Host, needs: Needs) -> Row:
    """KVM for a VM lab. Without it libvirt can still emulate the VM (qemu, slow), so the
    advice names that fallback; providers that make no VM do not need it at all."""
    cpuinfo = host.read("/proc/cpuinfo")
    flags = "vmx" if " vmx" in cpuinfo else "svm" if " svm" in cpuinfo else ""
    kvm = host.exists("/dev/kvm")
    observed = f"cpu flag {flags or 'none'}, /dev/kvm {'present' if kvm else 'absent'}"
    if needs.provider in ("host", "wsl2", "existing"):
        return Row("virtualization", "pass", f"{observed} (not needed for {needs.provider})")
    if needs.provider == "vagrant-virtualbox":  # VirtualBox uses VT-x/AMD-V, not /dev/kvm
        if flags:
            return Row("virtualization", "pass", f"cpu flag {flags}")
        return Row("virtualization", "fail", "cpu flag none",
                   "enable VT-x/AMD-V in the firmware (BIOS/UEFI): VirtualBox needs it for "
                   "a 64-bit VM; inside a VM, turn on nested virtualization on its host")
    if kvm:  # libvirt's KVM needs /dev/kvm; a VM with nested KVM may hide the cpu flag
        return Row("virtualization", "pass", observed)
    fallback = ("or, without KVM, run the VM emulated: `vagrant: {libvirt_driver: qemu, "
                "cpu_model: qemu64}` in lab.yaml (provider vagrant-libvirt; works, slowly: "
                "docs/install.md)")
    if needs.software_vm:
        return Row("virtualization", "warn", observed + "; libvirt_driver qemu (emulated)",
                   "the VM is emulated: expect an install several times slower than with KVM")
    advice = (f"load kvm_intel/kvm_amd (`sudo modprobe kvm_{'intel' if flags == 'vmx' else 'amd'}`"
              f"), {fallback}" if flags else
              f"enable VT-x/AMD-V in the firmware (and load kvm_intel/kvm_amd), {fallback}")
    return Row("virtualization", "fail" if needs.provider.startswith("vagrant") else "warn",
               observed, advice)


def diagnose(needs: Needs, host: Host) -> list[Row]:
    rows: list[Row] = []
    vm = needs.provider.startswith("vagrant")
    on_node = needs.provider in ("vagrant-virtualbox", "vagrant-libvirt", "wsl2", "host")

    cpus = host.read("/proc/cpuinfo").count("processor\t:") or os.cpu_count() or 0
    want_cpu = needs.cpus if on_node else 2
    want_mem = needs.memory_gib + (2 if vm else 0) if on_node else needs.local_memory_gib
    rows += sizing_rows(host, cpus, want_cpu, _meminfo_gib(host), want_mem,
                        needs.disk_gib if on_node else needs.local_disk_gib)

    rows.append(_virtualization_row(host, needs))

    if needs.provider not in ("host", "wsl2", "existing"):  # they make no VM
        vagrant = host.which("vagrant") is not None  # type: ignore[operator]
        rows.append(Row("vagrant", "pass" if vagrant else ("fail" if vm else "warn"),
                        "found" if vagrant else "not found",
                        "" if vagrant else "install Vagrant for a VM lab (docs/install.md)"))
        if vm or vagrant:
            vbox = host.which("VBoxManage") is not None  # type: ignore[operator]
            virsh = host.which("virsh") is not None  # type: ignore[operator]
            want = {"vagrant-virtualbox": vbox, "vagrant-libvirt": virsh}.get(needs.provider,
                                                                             True)
            seen = {"vagrant-virtualbox": f"VirtualBox {'found' if vbox else 'not found'}",
                    "vagrant-libvirt": f"libvirt {'found' if virsh else 'not found'}"}.get(
                needs.provider, f"virtualbox {'yes' if vbox else 'no'}, libvirt "
                                f"{'yes' if virsh else 'no'}")
            how = {"vagrant-virtualbox": "install VirtualBox (docs/install.md)",
                   "vagrant-libvirt": "install libvirt and vagrant-libvirt (docs/install.md)"}
            rows.append(Row("vm providers", "pass" if want else "fail", seen,
                            "" if want else how.get(needs.provider,
                                                    f"install the hypervisor for "
                                                    f"{needs.provider}")))

    wsl = is_wsl(host)
    rows.append(Row("wsl", "pass" if wsl or needs.provider != "wsl2" else "fail",
                    "WSL2" if wsl else "not WSL",
                    "" if wsl or needs.provider != "wsl2" else
                    "run kflab inside a WSL 2 distro (Windows: `wsl --install -d Debian`); "
                    "on a Linux machine use --provider host"))

    gpus = nvidia_gpus(host)
    pci = nvidia_pci_devices(host)
    want_gpu = needs.gpu != "off"
    if gpus:
        rows.append(Row("nvidia gpu", "pass", "; ".join(f"{g['name']} ({g['memory']})"
                                                        for g in gpus)))
    else:
        # No GPU at all is fine (CPU-only lab); a GPU without a driver is worth a warning.
        # libvirt passthrough: the host GPU is bound to vfio-pci, so no driver is expected.
        passthrough = needs.provider == "vagrant-libvirt"
        explicit = want_gpu and needs.gpu != "auto" and not passthrough
        status = "fail" if explicit else ("warn" if pci and want_gpu else "pass")
        rows.append(Row("nvidia gpu", status,
                        f"no driver; {len(pci)} NVIDIA PCI device(s)" if pci
                        else "none (CPU-only lab)",
                        ("expected for passthrough: the iommu and gpu rows judge it"
                         if passthrough else "install the NVIDIA driver for GPU labs") if pci else
                        ("set gpu: auto or off in lab.yaml" if explicit else "")))
    rows.append(gpu_discovery_row(host, bool(gpus or pci)))
    rows.append(_iommu_row(host, pci, needs))
    if needs.provider == "vagrant-libvirt" and want_gpu:
        rows += passthrough_rows(needs, host)
    if needs.provider == "vagrant-virtualbox" and pci and want_gpu:
        from lab.config import VIRTUALBOX_GPU_ADVICE

        rows.append(Row("gpu passthrough", "warn", "not possible with VirtualBox",
                        VIRTUALBOX_GPU_ADVICE))
    if needs.provider == "wsl2":
        rows += wsl_rows(host)
    if needs.provider == "host":
        rows += host_rows(host)
    if needs.provider == "existing":
        rows += existing_rows(needs, host)

    rows.append(local_backend_row())
    rows.append(container_engine_row(host))
    return rows
