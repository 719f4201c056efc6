"""A VM made by Vagrant: VirtualBox (CPU only) or libvirt (optionally with NVIDIA GPUs).

The Vagrantfile is rendered from vagrant/Vagrantfile.j2 into the lab's folder in the state
directory, so `vagrant` commands run there see exactly what kflab runs. Every port the VM
exposes is bound to 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from lab import content
from lab.config import VIRTUALBOX_GPU_ADVICE, Profile
from lab.doctor import linux as doctor_linux
from lab.doctor.rows import Host, Needs
from lab.errors import LabError, ToolMissing
from lab.providers.base import Capabilities, Gpu, Inventory, Say, State, ssh_argv_for
from lab.state import remove

TEMPLATE_DIR = content.vagrant_dir()
INSTALL_HINT = {
    "libvirt": "install Vagrant and its libvirt plugin (e.g. `sudo apt install vagrant "
               "vagrant-libvirt libvirt-daemon-system`; docs/install.md)",
    "virtualbox": "install Vagrant and VirtualBox from their official packages "
                  "(docs/install.md)",
}
# The box's key is Vagrant's insecure key, swapped by Vagrant on first boot; the VM's host
# key changes with every re-creation and it is only reachable on loopback.
SSH_ARGS = ("-o StrictHostKeyChecking=no", "-o UserKnownHostsFile=/dev/null",
            "-o LogLevel=ERROR")


@dataclass(frozen=True)
class PciDevice:
    domain: str
    bus: str
    slot: str
    function: str

    @classmethod
    def parse(cls, addr: str) -> PciDevice:
        dom, bus, rest = addr.split(":")
        slot, fn = rest.split(".")
        return cls(dom, bus, slot, fn)


def _rb(value: Any) -> str:
    """A Ruby double-quoted string literal (escapes quotes, backslashes and interpolation)."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("#", "\\#")
    return f'"{text}"'


def mac_for(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def render(profile: Profile, pci: list[str] | None = None, boot_timeout: int = 600) -> str:
    """The Vagrantfile for `profile`; `pci` are the host devices to pass through (libvirt)."""
    if pci and profile.provider == "vagrant-virtualbox":
        raise LabError("GPU passthrough is not possible with VirtualBox",
                       hint=VIRTUALBOX_GPU_ADVICE)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)  # noqa: S701 - renders Ruby, every value via |rb
    env.filters["rb"] = _rb
    user_net = profile.provider == "vagrant-libvirt" and profile.vagrant.network == "user"
    opts = profile.vagrant
    netdev = (f"user,id=kflab0,net=10.0.3.0/24,hostfwd=tcp:127.0.0.1:{opts.ssh_port}-:22,"
              f"hostfwd=tcp:127.0.0.1:{profile.api_port}-:6443")
    if opts.isolated:
        netdev += ",restrict=on"
    return env.get_template("Vagrantfile.j2").render(
        p=profile, user_net=user_net, netdev=netdev, mac=mac_for(profile.name),
        # UDP ports of the placeholder NIC: a pair per SSH port (unique per lab), 40000-59999
        tunnel_port=40000 + (opts.ssh_port % 10000) * 2,
        pci=[PciDevice.parse(a) for a in pci or []], boot_timeout=boot_timeout)


def passthrough_devices(profile: Profile, host: Host | None = None) -> list[str]:
    """The PCI functions to hand to the VM: each wanted GPU with its whole IOMMU group.

    gpu: auto takes the NVIDIA GPUs already bound to vfio-pci (a GPU the host still drives
    is left alone); an explicit list must pass the doctor's checks or nothing starts.
    """
    host = host or Host()
    if profile.provider != "vagrant-libvirt" or not profile.gpu_wanted:
        return []
    needs = Needs.from_profile(profile)
    if profile.gpu_pci:
        bad = [r for r in doctor_linux.passthrough_rows(needs, host) if r.status == "fail"]
        if bad:
            raise LabError("GPU passthrough is not ready: " + "; ".join(
                f"{r.name}: {r.observed}" for r in bad), hint=bad[0].advice)
        wanted = list(profile.gpu_pci)
    else:
        wanted = [p for p in doctor_linux.nvidia_pci_devices(host)
                  if doctor_linux.pci_driver(host, p) == "vfio-pci"]
    out: list[str] = []
    for addr in wanted:
        for dev in doctor_linux.iommu_siblings(host, addr) or [addr]:
            if dev not in out:
                out.append(dev)
    return out


def _import_vagrant() -> Any:
    """python-vagrant, without the warning it logs at import when vagrant is not on PATH
    (kflab says that itself, once, in its own words)."""
    logging.getLogger("vagrant").addHandler(logging.NullHandler())
    import vagrant

    return vagrant


class VagrantProvider:
    capabilities = Capabilities()

    def __init__(self, profile: Profile, workdir: Path) -> None:
        self.profile = profile
        self.name = profile.provider
        self.root = workdir / "vagrant"
        self.workdir = workdir
        self.vagrant_provider = profile.provider.removeprefix("vagrant-")

    # -- helpers --------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["VAGRANT_DEFAULT_PROVIDER"] = self.vagrant_provider
        env["VAGRANT_NO_COLOR"] = "1"
        if self.vagrant_provider == "virtualbox":
            env["VAGRANT_EXPERIMENTAL"] = "disks"
        return env

    def require_tool(self) -> None:
        """Refuse in one line, before python-vagrant raises its own RuntimeError."""
        if shutil.which("vagrant") is None:
            raise ToolMissing("vagrant", self.profile.name, self.profile.provider,
                              INSTALL_HINT[self.vagrant_provider])

    def _vagrant(self, log: Path | None = None) -> Any:
        self.require_tool()
        vagrant = _import_vagrant()
        cm = vagrant.make_file_cm(str(log)) if log else None
        return vagrant.Vagrant(str(self.root), env=self._env(), out_cm=cm, err_cm=cm)

    def _created(self) -> bool:
        return (self.root / "Vagrantfile").exists()

    def write_vagrantfile(self, pci: list[str]) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "Vagrantfile"
        text = render(self.profile, pci)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        (self.workdir / "gpus.json").write_text(json.dumps(pci))
        return path

    # -- protocol -------------------------------------------------------------------------
    def create(self, profile: Profile, say: Say) -> None:
        self.profile = profile
        if profile.provider == "vagrant-virtualbox" and profile.gpu_pci:
            raise LabError("GPU passthrough is not possible with VirtualBox",
                           hint=VIRTUALBOX_GPU_ADVICE)
        self.require_tool()
        if profile.vagrant.box:  # a baked box file: verified, added once, booted by name
            from dataclasses import replace

            from lab.providers.vagrant_box import ensure_added

            ref = ensure_added(Path(profile.vagrant.box), self.vagrant_provider, say)
            profile = self.profile = replace(profile, box=ref.name, box_version=ref.version)
        pci = passthrough_devices(profile)
        if profile.provider == "vagrant-virtualbox" and profile.gpu == "auto":
            say("VirtualBox: no GPU passthrough, the lab is CPU-only")
        elif profile.gpu == "auto" and profile.provider == "vagrant-libvirt" and not pci:
            say("no NVIDIA GPU bound to vfio-pci: the lab is CPU-only (kflab doctor explains)")
        self.write_vagrantfile(pci)
        log = self.workdir / "vagrant.log"
        say(f"vagrant up ({self.vagrant_provider}, {profile.cpus} CPUs, {profile.memory} GiB"
            f"{', GPU ' + ', '.join(pci) if pci else ''}); log: {log}")
        lines: list[str] = []
        try:
            with open(log, "a") as fh:
                vagrant = _import_vagrant()
                v = vagrant.Vagrant(str(self.root), env=self._env(),
                                    err_cm=vagrant.make_file_cm(str(log)))
                for line in v.up(provider=self.vagrant_provider, stream_output=True):
                    fh.write(line)
                    fh.flush()
                    text = line.strip()
                    lines.append(text)
                    if text.startswith("==>") or "rror" in text:
                        say(text)
        except subprocess.CalledProcessError:
            try:  # stderr went to the log: its last lines say why
                logged = log.read_text(errors="replace").strip().splitlines()
            except OSError:
                logged = lines
            tail = "\n    ".join(ln for ln in logged[-8:] if ln.strip())
            raise LabError(f"vagrant up failed:\n    {tail}", hint=f"full log: {log}; fix and "
                           "re-run `kflab up` (it resumes)") from None
        except FileNotFoundError:
            raise ToolMissing("vagrant", profile.name, profile.provider,
                              INSTALL_HINT[self.vagrant_provider]) from None

    def preflight(self) -> None:
        """Nothing beyond `kflab doctor`'s rows, which `kflab up` has already judged."""

    def describe(self, profile: Profile) -> list[str]:
        if shutil.which("vagrant") is None:
            return [f"vagrant is not installed: {INSTALL_HINT[self.vagrant_provider]}"]
        state = self.status()
        if state.state == "running":
            return [f"{state.detail}: exists and runs, nothing is created"]
        pci = passthrough_devices(profile)
        opts = profile.vagrant
        ports = (f"SSH 127.0.0.1:{opts.ssh_port}, " if profile.provider == "vagrant-libvirt"
                 and opts.network == "user" else "SSH on 127.0.0.1 (Vagrant's forward), ")
        emulated = opts.libvirt_driver == "qemu" and self.vagrant_provider == "libvirt"
        return [
            ("starts" if state.state == "stopped" else "creates") + f" VM {profile.name} "
            f"({self.vagrant_provider}{', emulated: qemu, no KVM' if emulated else ''}): "
            f"{profile.cpus} CPUs, {profile.memory} GiB memory, {profile.disk} GiB disk, box "
            + (f"from {profile.vagrant.box} (sha256 checked, added to Vagrant once; nothing "
               "downloaded)" if profile.vagrant.box else
               f"{profile.box}{' ' + profile.box_version if profile.box_version else ''} "
               "(downloaded once by Vagrant if missing)"),
            f"writes its Vagrantfile to {self.root / 'Vagrantfile'}",
            ports + f"Kubernetes API 127.0.0.1:{profile.api_port}; nothing else listens",
            f"GPU passthrough: {', '.join(pci)}" if pci else "no GPU passed through",
            "nothing on this machine changes besides the VM and its disk image"]

    def reachable(self) -> bool:
        return (self._created() and shutil.which("vagrant") is not None
                and self.status().state == "running")

    def stop(self, say: Say) -> None:
        if self._created() and self.status().state == "running":
            say("vagrant halt")
            self._vagrant(self.workdir / "vagrant.log").halt()

    def delete(self, say: Say) -> None:
        if self._created():
            self.require_tool()
            say("vagrant destroy")
            try:
                self._vagrant(self.workdir / "vagrant.log").destroy()
            except subprocess.CalledProcessError as exc:
                raise LabError(f"vagrant destroy failed ({exc.returncode})",
                               hint=f"see {self.workdir / 'vagrant.log'}") from None
            remove(self.workdir, self.root / "Vagrantfile")

    def status(self) -> State:
        if not self._created():
            return State("absent", "no VM (run `kflab up`)")
        try:
            found = self._vagrant().status()
        except (subprocess.CalledProcessError, FileNotFoundError) as exc:
            return State("unknown", f"vagrant status failed: {exc}")
        raw = found[0].state if found else "unknown"
        state = {"running": "running", "not_created": "absent", "poweroff": "stopped",
                 "shutoff": "stopped", "saved": "stopped", "shutdown": "stopped"}.get(
                     raw, "unknown")
        return State(state, f"VM {self.profile.name}: {raw} ({self.vagrant_provider})")

    def inventory(self) -> Inventory:
        try:
            conf = self._vagrant().conf()
        except subprocess.CalledProcessError as exc:
            raise LabError("cannot read the VM's SSH settings (is it running?)",
                           hint="run `kflab up`") from exc
        return Inventory(connection="ssh", host=conf.get("HostName", "127.0.0.1"),
                         port=int(conf.get("Port", 22)), user=conf.get("User", "vagrant"),
                         key=conf.get("IdentityFile", "").strip('"'), ssh_args=SSH_ARGS)

    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def gpus(self) -> list[Gpu]:
        try:
            pci = json.loads((self.workdir / "gpus.json").read_text())
        except (OSError, ValueError):
            return []
        host = Host()
        out = []
        for addr in pci:
            if host.read(f"/sys/bus/pci/devices/{addr}/class").startswith("0x03"):
                out.append(Gpu(name="NVIDIA GPU (passthrough)", pci=addr))
        return out

    def ssh_argv(self) -> list[str]:
        return ssh_argv_for(self.inventory())
