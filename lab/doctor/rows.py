"""What every platform's preflight shares: what the lab needs of the host (`Needs`), the host
as every probe reads it (`Host`: a root folder, a command runner, the platform), one row of
the report (`Row`: pass / warn / fail), and the rows that read the same on Linux and macOS
(sizing, an existing cluster's kubeconfig, the GPUs the local backend gives out, the local
backend's packages, the container engine).

Every probe reads the host through `Host`, so tests point it at stand-in /proc and /sys trees
and at a stand-in `sysctl`.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.deps import install_extras

GIB = 1024**3


@dataclass(frozen=True)
class Needs:
    """What the lab needs. Defaults: the local backend, plus a lab VM of 4 CPUs / 8 GiB."""

    cpus: int = 4
    memory_gib: float = 8.0
    disk_gib: float = 40.0
    local_memory_gib: float = 4.0
    local_disk_gib: float = 5.0
    provider: str = "local"  # local | vagrant-virtualbox | vagrant-libvirt | wsl2 | host | existing
    gpu: str = "auto"  # auto | off | PCI addresses
    gpu_pci: tuple[str, ...] = ()  # explicit PCI addresses (gpu lists them)
    kubeconfig: str = ""  # existing: the kubeconfig file
    context: str = ""  # existing: the context ("" = current)
    software_vm: bool = False  # libvirt_driver qemu: emulation, no KVM needed (slow)

    @classmethod
    def from_profile(cls, profile: Any) -> Needs:
        """What a lab profile (lab.config.Profile) asks of this host."""
        pci = tuple(profile.gpu_pci)
        return cls(cpus=profile.cpus, memory_gib=float(profile.memory),
                   disk_gib=float(profile.disk), provider=profile.provider,
                   gpu="pci" if pci else str(profile.gpu), gpu_pci=pci,
                   kubeconfig=profile.kubeconfig if profile.provider == "existing" else "",
                   context=profile.context,
                   software_vm=profile.provider == "vagrant-libvirt"
                   and profile.vagrant.libvirt_driver == "qemu")


@dataclass
class Row:
    name: str
    status: str  # pass | warn | fail
    observed: str
    advice: str = ""


@dataclass
class Host:
    root: Path = Path("/")
    which: object = shutil.which
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    # The one platform seam: "Darwin" takes the macOS rows (macos.py), else Linux's.
    system: str = field(default_factory=platform.system)
    machine: str = field(default_factory=platform.machine)
    # None: measure the disk under `root`; a stand-in host tree says what it has free instead
    disk_free_gib: float | None = None

    def free_gib(self) -> float:
        if self.disk_free_gib is not None:
            return self.disk_free_gib
        try:
            return shutil.disk_usage(self.root).free / GIB
        except OSError:
            return 0.0

    def read(self, rel: str) -> str:
        try:
            return (self.root / rel.lstrip("/")).read_text(errors="replace")
        except OSError:
            return ""

    def exists(self, rel: str) -> bool:
        return (self.root / rel.lstrip("/")).exists()

    def run(self, argv: list[str], timeout: float = 10) -> tuple[int, str]:
        exe = self.which(argv[0])  # type: ignore[operator]
        if exe is None:
            return 127, ""
        try:
            proc = subprocess.run([str(exe), *argv[1:]], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 1, str(exc)
        return proc.returncode, proc.stdout + proc.stderr


def existing_rows(needs: Needs, host: Host) -> list[Row]:
    path = Path(os.path.expanduser(needs.kubeconfig or "~/.kube/config"))
    if not path.is_file():
        return [Row("kubeconfig", "fail", f"{path} not found",
                    "point `kubeconfig` in lab.yaml at your cluster's kubeconfig")]
    from lab.errors import InputError
    from lab.yamlio import load_file

    try:
        data = load_file(path, duplicates="keep").data
    except InputError as exc:
        return [Row("kubeconfig", "fail", str(exc).splitlines()[0], "fix or regenerate the file")]
    data = data if isinstance(data, dict) else {}
    raw = data.get("contexts")
    contexts = [c.get("name") for c in raw if isinstance(c, dict)] if isinstance(raw, list) \
        else []
    want = needs.context or data.get("current-context") or ""
    ok = want in contexts
    return [Row("kubeconfig", "pass" if ok else "fail", f"{path}: context {want or '(none)'}",
                "" if ok else f"pick one of: {', '.join(map(str, contexts)) or 'none'}")]


def sizing_rows(host: Host, cpus: int, want_cpu: int, mem: float, want_mem: float,
                want_disk: float) -> list[Row]:
    """The cpus, memory and disk rows: one rule for Linux and macOS, whatever each measures."""
    free = host.free_gib()
    return [
        Row("cpus", "pass" if cpus >= want_cpu else "warn", str(cpus),
            "" if cpus >= want_cpu else f"the lab wants {want_cpu}; it will be slow"),
        Row("memory", "pass" if mem >= want_mem else "fail", f"{mem:.1f} GiB",
            "" if mem >= want_mem else
            f"needs {want_mem:.0f} GiB: close programs or lower `memory` in lab.yaml"),
        Row("disk", "pass" if free >= want_disk else "fail", f"{free:.0f} GiB free",
            "" if free >= want_disk else f"free at least {want_disk:.0f} GiB"),
    ]


def gpu_discovery_row(host: Host, nvidia_here: bool) -> Row:
    """Which GPUs the local backend can give workloads: NVML's, by UUID, narrowed by the
    user's CUDA_VISIBLE_DEVICES (backends/local/gpu_devices.py), or why none; and whether
    they can run the bf16 labs (compute capability 8.0 or newer)."""
    from lab.backends.local import gpu_devices

    found = gpu_devices.view(host.env)
    if found.error:
        return Row("gpu discovery", "fail", found.error,
                   f"name GPUs that `nvidia-smi -L` lists, or unset {gpu_devices.VARIABLE}")
    if not found.devices:
        missing_nvml = "nvidia-ml-py" in found.why
        status = "warn" if nvidia_here and (missing_nvml or not found.value) else "pass"
        return Row("gpu discovery", status, f"no GPU for local workloads: {found.why}",
                   install_extras("local") if missing_nvml and nvidia_here else "")
    observed = "; ".join(g.describe() for g in found.devices)
    if found.why:
        observed += f" ({found.why})"
    short = gpu_devices.capability_short(found.devices, gpu_devices.BF16)
    if short:
        return Row("gpu discovery", "warn", observed,
                   "the bf16 labs (gpu-check, mixed-precision-and-profiling, "
                   "input-pipeline-bottleneck) need compute capability 8.0 or newer "
                   "(Ampere, Ada, Hopper...): they skip their GPU steps on "
                   + ", ".join(g.label for g in short))
    return Row("gpu discovery", "pass", observed)


def container_engine_row(host: Host) -> Row:
    """The engine that runs images kflab does not run as processes: which, version,
    rootless or not, running or not (lab/backends/local/containers/engine.py)."""
    from lab.backends.local.containers import engine as engines
    from lab.errors import LabError

    def which(name: str) -> str | None:
        found = host.which(name)  # type: ignore[operator]
        return str(found) if found else None

    def run(argv: list[str], timeout: float) -> tuple[int, str, str]:
        code, out = host.run(argv, timeout)
        return code, out, out

    try:
        found = engines.select(host.env, which, run)
    except LabError as exc:
        return Row("container engine", "fail", str(exc).split("\n")[0],
                   exc.hint or f"fix {engines.ENV}")
    status, observed, advice = engines.describe(found)
    return Row("container engine", status, observed, advice)


def local_backend_row() -> Row:
    missing = [m for m in ("kfp", "optuna", "torch", "kserve", "sklearn")
               if importlib.util.find_spec(m) is None]
    return Row("local backend", "pass" if not missing else "warn",
               "ML stack installed" if not missing else f"missing: {', '.join(missing)}",
               "" if not missing else install_extras("local"))


def as_dicts(rows: list[Row]) -> list[dict[str, str]]:
    return [asdict(r) for r in rows]
