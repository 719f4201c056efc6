"""Host preflight on macOS: which providers apply here, and the Mac's own resources.

A Mac runs the local backend (kfp.local, Optuna, torch on CPU, KServe's model server) and,
on an Intel Mac, a VirtualBox VM. libvirt and the `host` provider are Linux-only, WSL is
Windows-only, and no GPU reaches a lab from a Mac (no NVIDIA GPU, no passthrough in
VirtualBox). Facts come from `sysctl` through Host.run, the seam the Linux probes use too
(rows.py).
"""

from __future__ import annotations

import os

from lab.doctor.rows import (
    GIB,
    Host,
    Needs,
    Row,
    container_engine_row,
    existing_rows,
    local_backend_row,
    sizing_rows,
)

APPLE_SILICON = ("arm64", "aarch64")


def providers(machine: str) -> dict[str, tuple[bool, str]]:
    """Every provider (and the local backend): does it apply on this Mac, and why."""
    apple = machine in APPLE_SILICON
    return {
        "local": (True, "the local backend: every scenario, on CPU"),
        "existing": (True, "a cluster you already have a kubeconfig for"),
        "vagrant-virtualbox": (
            not apple,
            "VirtualBox for Arm cannot run the lab's x86 box" if apple
            else "a VirtualBox VM (CPU only)"),
        "vagrant-libvirt": (False, "Linux only, as is GPU passthrough"),
        "host": (False, "Linux only"),
        "wsl2": (False, "Windows only"),
    }


def _sysctl(host: Host, key: str) -> str:
    code, out = host.run(["sysctl", "-n", key])
    return out.strip() if code == 0 else ""


def _memory_gib(host: Host) -> float:
    raw = _sysctl(host, "hw.memsize")
    return int(raw) / GIB if raw.isdigit() else 0.0


def diagnose(needs: Needs, host: Host) -> list[Row]:
    fit = providers(host.machine)
    chip = "Apple silicon" if host.machine in APPLE_SILICON else "Intel"
    applies = [name for name, (ok, _) in fit.items() if ok]
    ok = fit.get(needs.provider, (False, ""))[0]
    rows = [Row("platform", "pass", f"macOS, {chip} ({host.machine})"),
            Row("providers", "pass" if ok else "fail",
                f"apply: {', '.join(applies)}; not here: " + ", ".join(
                    f"{name} ({reason})" for name, (good, reason) in fit.items() if not good),
                "" if ok else f"{needs.provider} does not apply on macOS: use "
                f"{' or '.join(applies)} (provider: in lab.yaml, or --provider)")]
    vm = needs.provider == "vagrant-virtualbox"

    cpus = os.cpu_count() or 0
    want_cpu = needs.cpus if vm else 2
    want_mem = needs.memory_gib + 2 if vm else needs.local_memory_gib
    rows += sizing_rows(host, cpus, want_cpu, _memory_gib(host), want_mem,
                        needs.disk_gib if vm else needs.local_disk_gib)

    if vm:
        hv = _sysctl(host, "kern.hv_support") == "1"
        rows.append(Row("virtualization", "pass" if hv else "fail",
                        f"kern.hv_support {'1' if hv else 'not 1'}",
                        "" if hv else "this Mac offers no hardware virtualization for a VM"))
        for tool, advice in (("vagrant", "install Vagrant (docs/install.md)"),
                             ("VBoxManage", "install VirtualBox (docs/install.md)")):
            found = host.which(tool) is not None  # type: ignore[operator]
            rows.append(Row(tool.lower(), "pass" if found else "fail",
                            "found" if found else "not found", "" if found else advice))

    passthrough = bool(needs.gpu_pci)
    rows.append(Row("gpu", "fail" if passthrough else "pass",
                    "none reaches a lab on macOS: scenarios run on CPU",
                    "GPU passthrough needs vagrant-libvirt on Linux: set gpu: auto or off"
                    if passthrough else ""))
    if needs.provider == "existing":
        rows += existing_rows(needs, host)
    rows.append(local_backend_row())
    rows.append(container_engine_row(host))  # Docker Desktop, or a Podman machine
    return rows
