"""Providers that provision the machine kflab runs on: a WSL 2 distro, or this Linux host.

Ansible connects locally (no SSH); the k3s role installs k3s here with sudo. Their checks
are the doctor's rows, so `kflab doctor` and `kflab up` never disagree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lab.config import Profile
from lab.doctor import linux as doctor_linux
from lab.doctor.rows import Host
from lab.errors import LabError, ToolMissing
from lab.providers.base import Capabilities, Gpu, Inventory, Say, State
from lab.state import remove

WSL_LIB = "/usr/lib/wsl/lib"
UNINSTALL = "/usr/local/bin/kflab-uninstall.sh"  # k3s role: k3s_uninstall


def wsl_exe_version(host: Host, distro: str) -> int | None:
    """The WSL version (1 or 2) that Windows reports for `distro`, via wsl.exe interop.

    wsl.exe writes UTF-16LE; a '*' marks the default distro. None when interop is off.
    """
    exe = host.which("wsl.exe")  # type: ignore[operator]
    if exe is None or not distro:
        return None
    try:
        raw = subprocess.run([exe, "--list", "--verbose"], capture_output=True, timeout=20,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = raw.decode("utf-16-le", errors="replace") if b"\x00" in raw else raw.decode(
        errors="replace")
    for line in text.replace("\ufeff", "").splitlines():
        parts = line.replace("*", " ").split()
        if len(parts) >= 3 and parts[0] == distro and parts[-1] in ("1", "2"):
            return int(parts[-1])
    return None


class _Local:
    capabilities = Capabilities(own_machine=True)
    name = ""
    rows_fn = staticmethod(doctor_linux.host_rows)

    def __init__(self, profile: Profile, workdir: Path, host: Host | None = None) -> None:
        self.profile = profile
        self.workdir = workdir
        self.host = host or Host()

    def preflight(self) -> None:
        """The doctor's rows for this provider (`kflab up` runs it unless --force)."""
        bad = [r for r in self.rows_fn(self.host) if r.status == "fail"]
        if bad:
            raise LabError(f"{self.name}: " + "; ".join(f"{r.name}: {r.observed}" for r in bad),
                           hint=bad[0].advice)

    def create(self, profile: Profile, say: Say) -> None:
        self.profile = profile
        say(f"{self.name}: provisioning this machine in place (sudo)")

    def stop(self, say: Say) -> None:
        say(f"{self.name}: the node is this machine; stop k3s with `sudo systemctl stop k3s`")

    def delete(self, say: Say) -> None:
        # Written by the k3s role: it removes what kflab's roles installed here and keeps
        # the user's own commands.
        uninstall = self.host.root / UNINSTALL.lstrip("/")
        if uninstall.exists():
            say(f"removing k3s and kflab's node files ({UNINSTALL})")
            argv = [str(uninstall)] if os.geteuid() == 0 else ["sudo", str(uninstall)]
            if shutil.which(argv[0]) is None:
                raise ToolMissing("sudo", self.profile.name, self.name,
                                  f"run {uninstall} as root yourself")
            done = subprocess.run(argv, check=False)
            if done.returncode != 0:
                raise LabError(f"{uninstall} failed (exit {done.returncode}); k3s may be "
                               "partly removed", hint=f"run `sudo {uninstall}` yourself, or "
                               "`kflab down --destroy --force` to forget the lab anyway")
        remove(self.workdir, self.kubeconfig())

    def require_tool(self) -> None:
        """Nothing to drive: Ansible and kubectl come with kflab."""

    def describe(self, profile: Profile) -> list[str]:
        import socket

        return [f"nothing is created: the node is THIS machine ({socket.gethostname()}); "
                "Ansible connects locally and changes it with sudo"]

    def reachable(self) -> bool:
        return True

    def status(self) -> State:
        k3s = self.host.exists("/usr/local/bin/k3s")
        return State("running" if k3s else "absent",
                     f"{self.name}: k3s {'installed' if k3s else 'not installed'} on this machine")

    def inventory(self) -> Inventory:
        # root needs no sudo (a container or a root shell may not even have it)
        return Inventory(connection="local", host="localhost", become=os.geteuid() != 0)

    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def gpus(self) -> list[Gpu]:
        return [Gpu(g["name"], g["pci"], g["memory"]) for g in doctor_linux.nvidia_gpus(self.host)]

    def ssh_argv(self) -> list[str]:
        return [os.environ.get("SHELL", "/bin/sh")]


class HostProvider(_Local):
    name = "host"


class Wsl2Provider(_Local):
    """This WSL 2 distro; the GPU is the one Windows shares through CUDA on WSL."""

    name = "wsl2"

    def preflight(self) -> None:
        if not doctor_linux.is_wsl(self.host):
            raise LabError("wsl2: this is not a WSL distro",
                           hint="run kflab inside your WSL 2 distro, or pick another provider")
        bad = [r for r in doctor_linux.wsl_rows(self.host) if r.status == "fail"]
        distro = self.host.env.get("WSL_DISTRO_NAME", "")
        version = wsl_exe_version(self.host, distro)
        if version == 1:
            raise LabError(f"wsl2: Windows runs distro {distro} under WSL 1",
                           hint=f"in PowerShell: wsl --set-version {distro} 2")
        if bad:
            raise LabError("wsl2: " + "; ".join(f"{r.name}: {r.observed}" for r in bad),
                           hint=bad[0].advice)

    def gpus(self) -> list[Gpu]:
        smi = self.host.root / WSL_LIB.lstrip("/") / "nvidia-smi"
        if not smi.exists():
            return []
        host = Host(self.host.root, which=lambda name: str(smi) if name == "nvidia-smi"
                           else None, env=self.host.env)
        return [Gpu(g["name"], g["pci"], g["memory"]) for g in doctor_linux.nvidia_gpus(host)]
