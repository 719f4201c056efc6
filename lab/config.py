"""The lab profile (lab.yaml): where the lab lives, how big it is, GPU, components.

Loaded through lab.yamlio so that every error names the file, the line, the field and the
fix; nothing is applied from a profile that fails validation. `init_text()` writes the
commented starting point that `kflab init` puts on disk.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab.errors import InputError, LabError
from lab.yamlio import Located, exists, load_documents, read_text

PROVIDERS = ("vagrant-virtualbox", "vagrant-libvirt", "wsl2", "host", "existing")
BACKENDS = ("local", "cluster")  # where scenario workloads run (lab/backends)


def _lab_components() -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """The installable components in install order, and what each cannot start without,
    from the one catalog (manifests/versions.yaml) the Ansible roles also read. The NVIDIA
    device plugin follows `gpu`, not this list."""
    from lab.components.catalog import load

    comps = [c for c in load().components if not c.gpu_only]
    return tuple(c.name for c in comps), {c.name: c.requires for c in comps if c.requires}


COMPONENTS, REQUIRES = _lab_components()
DEFAULT_BOX = "generic/debian12"
PCI_RE = re.compile(r"^(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
VERSION_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
VERSION_RE = re.compile(r"^v?[0-9][0-9A-Za-z.+_-]*$")
PROFILE_FILE = "lab.yaml"

VIRTUALBOX_GPU_ADVICE = (
    "VirtualBox cannot pass a GPU through to a VM. Alternatives: provider vagrant-libvirt on "
    "a Linux host with IOMMU, provider wsl2 on Windows (CUDA on WSL), provider host on a Linux "
    "GPU machine, or `gpu: off` for a CPU-only lab")


@dataclass(frozen=True)
class VagrantOptions:
    """Knobs a Vagrant user may need; defaults suit a normal KVM or VirtualBox host."""

    libvirt_driver: str = "kvm"  # qemu = software emulation, for hosts without KVM
    network: str = "managed"  # managed: libvirt's NAT network; user: qemu user-mode, loopback
    isolated: bool = False  # user network only: the VM gets no outbound traffic
    cpu_model: str = ""  # e.g. qemu64 with libvirt_driver qemu
    storage_pool_path: str = ""
    ssh_port: int = 2222  # host side of SSH on 127.0.0.1 (user network)
    # a baked box (`kflab box build`): its .box file or metadata.json; added to Vagrant under
    # a content-addressed name after its sha256 is checked ("" = the profile's `box:` name)
    box: str = ""


@dataclass(frozen=True)
class Profile:
    provider: str
    name: str = "kflab"
    cpus: int = 4
    memory: int = 8  # GiB
    disk: int = 40  # GiB
    box: str = DEFAULT_BOX
    box_version: str = ""
    gpu: str | tuple[str, ...] = "auto"  # auto | off | PCI addresses
    components: tuple[str, ...] = COMPONENTS
    versions: dict[str, str] = field(default_factory=dict)
    offline: str = ""  # folder of pre-downloaded artifacts ("" = download)
    api_port: int = 6443  # host side of the Kubernetes API on 127.0.0.1
    kubeconfig: str = "~/.kube/config"  # existing only
    context: str = ""  # existing only ("" = current context)
    backend: str = ""  # default backend for workload commands ("" = the lab's, else local)
    vagrant: VagrantOptions = field(default_factory=VagrantOptions)
    source: str = ""  # the file it came from ("" = defaults)

    @property
    def gpu_wanted(self) -> bool:
        return self.gpu != "off"

    @property
    def gpu_pci(self) -> tuple[str, ...]:
        return self.gpu if isinstance(self.gpu, tuple) else ()

    @property
    def is_vagrant(self) -> bool:
        return self.provider.startswith("vagrant-")

    def with_overrides(self, **changes: Any) -> Profile:
        """A copy with CLI overrides applied, validated like the file."""
        known = {k: v for k, v in changes.items() if v is not None}
        if not known:
            return self
        return validate(profile_to_data(replace(self, **known)), self.source or "<options>")


def normalize_pci(addr: str) -> str:
    addr = addr.strip().lower()
    return addr if addr.count(":") == 2 else f"0000:{addr}"


# --- validation --------------------------------------------------------------------------

_TOP = {"provider", "name", "cpus", "memory", "disk", "box", "box_version", "gpu",
        "components", "versions", "offline", "api_port", "kubeconfig", "context", "vagrant",
        "backend"}
_VAGRANT = {"libvirt_driver", "network", "isolated", "cpu_model", "storage_pool_path",
            "ssh_port", "box"}


def _unknown(doc: Located, path: tuple[str, ...], key: str, allowed: set[str]) -> InputError:
    close = difflib.get_close_matches(key, sorted(allowed), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(sorted(allowed))}"
    return doc.error((*path, key), "unknown field", hint)


def _int(doc: Located, path: tuple[str, ...], value: Any, lo: int, hi: int, unit: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise doc.error(path, f"must be a whole number, got {value!r}",
                        f"write a number between {lo} and {hi}{unit}")
    if not lo <= value <= hi:
        raise doc.error(path, f"{value}{unit} is out of range",
                        f"use a value between {lo} and {hi}{unit}")
    return value


def _str(doc: Located, path: tuple[str, ...], value: Any, hint: str) -> str:
    if not isinstance(value, str):
        raise doc.error(path, f"must be text, got {type(value).__name__} {value!r}", hint)
    return value


def _choice(doc: Located, path: tuple[str, ...], value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = (f"did you mean '{close[0]}'? " if close else "") + f"one of: {', '.join(choices)}"
        raise doc.error(path, f"{value!r} is not a valid choice", hint)
    return str(value)


def _gpu(doc: Located, value: Any, provider: str) -> str | tuple[str, ...]:
    path = ("gpu",)
    if value is False:
        value = "off"  # YAML 1.1 reads a bare `off` as false
    if isinstance(value, str) and value in ("auto", "off"):
        return value
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise doc.error(path, f"must be auto, off or a list of PCI addresses, got {value!r}",
                        "e.g. `gpu: auto`, `gpu: off` or `gpu: [\"0000:01:00.0\"]`")
    out = []
    for i, item in enumerate(items):
        p = (*path, i) if isinstance(value, list) else path
        if not isinstance(item, str) or not PCI_RE.match(item.strip().lower()):
            raise doc.error(p, f"{item!r} is not a PCI address",
                            "write it as lspci -D prints it, e.g. 0000:01:00.0 (quote it)")
        out.append(normalize_pci(item))
    if provider == "vagrant-virtualbox":
        raise doc.error(path, "GPU passthrough is not possible with VirtualBox",
                        VIRTUALBOX_GPU_ADVICE)
    if provider in ("wsl2", "existing"):
        raise doc.error(path, f"PCI addresses mean nothing to provider {provider}",
                        "use gpu: auto or gpu: off")
    return tuple(dict.fromkeys(out))


def _components(doc: Located, value: Any) -> tuple[str, ...]:
    path = ("components",)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise doc.error(path, "must be a list", f"e.g. components: [{', '.join(COMPONENTS)}]")
    seen: list[str] = []
    for i, item in enumerate(value):
        name = _choice(doc, (*path, i), item, COMPONENTS)
        if name not in seen:
            seen.append(name)
    for name in seen:
        for dep in REQUIRES.get(name, ()):
            if dep not in seen:
                raise doc.error(path, f"{name} needs {dep}", f"add {dep} to components")
    return tuple(c for c in COMPONENTS if c in seen)  # install order, whatever the file's


def _versions(doc: Located, value: Any) -> dict[str, str]:
    path = ("versions",)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(path, "must be a mapping of artifact name to version",
                        "e.g. versions: {k3s: v1.33.5+k3s1}")
    out = {}
    for key, ver in value.items():
        if not VERSION_KEY_RE.match(key):
            raise doc.error((*path, key), "not an artifact name",
                            "use a name from manifests/versions.yaml")
        if isinstance(ver, int | float) and not isinstance(ver, bool):
            ver = str(ver)
        if not isinstance(ver, str) or not VERSION_RE.match(ver):
            raise doc.error((*path, key), f"{ver!r} is not a version",
                            "quote it, e.g. \"v1.33.5+k3s1\"")
        out[key] = ver
    return out


def _vagrant(doc: Located, value: Any) -> VagrantOptions:
    path = ("vagrant",)
    if value is None:
        return VagrantOptions()
    if not isinstance(value, dict):
        raise doc.error(path, "must be a mapping", "e.g. vagrant: {libvirt_driver: kvm}")
    for key in value:
        if key not in _VAGRANT:
            raise _unknown(doc, path, key, _VAGRANT)
    opts = VagrantOptions()
    kw: dict[str, Any] = {}
    if "libvirt_driver" in value:
        kw["libvirt_driver"] = _choice(doc, (*path, "libvirt_driver"), value["libvirt_driver"],
                                       ("kvm", "qemu"))
    if "network" in value:
        kw["network"] = _choice(doc, (*path, "network"), value["network"], ("managed", "user"))
    if "isolated" in value:
        if not isinstance(value["isolated"], bool):
            raise doc.error((*path, "isolated"), "must be true or false")
        kw["isolated"] = value["isolated"]
    for key in ("cpu_model", "storage_pool_path"):
        if key in value:
            text = _str(doc, (*path, key), value[key] or "", f"quote the {key}")
            if not re.match(r"^[A-Za-z0-9_./+-]*$", text):
                raise doc.error((*path, key), f"{text!r} has characters Vagrant would not accept",
                                "use letters, digits and . / _ + - only")
            kw[key] = text
    if "ssh_port" in value:
        kw["ssh_port"] = _int(doc, (*path, "ssh_port"), value["ssh_port"], 1024, 65535, "")
    if value.get("box"):
        kw["box"] = box_file_path(doc, _str(doc, (*path, "box"), value["box"],
                                            "give the path of a .box file or its metadata.json"))
    return replace(opts, **kw)


def box_file_path(doc: Located, text: str) -> str:
    """vagrant.box: a .box file or a box metadata .json, relative to the lab.yaml; absolute."""
    path = Path(text).expanduser()
    if not path.is_absolute() and doc.file not in ("<input>", "<options>") \
            and Path(doc.file).is_file():
        path = Path(doc.file).resolve().parent / path
    path = path.resolve()
    if path.suffix not in (".box", ".json"):
        raise doc.error(("vagrant", "box"), f"{text!r} is neither a .box file nor a .json "
                        "box metadata file", "give what `kflab box build` wrote: "
                        "NAME.box or metadata.json")
    if not path.is_file():
        raise doc.error(("vagrant", "box"), f"{path} does not exist",
                        "copy the box the instructor handed out there, or fix the path")
    return str(path)


def validate(data: Any, file: str = "<input>", lines: Located | None = None) -> Profile:
    """Check a parsed profile and return it; raise InputError naming field, line and fix."""
    doc = lines or Located(data, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise doc.error((), "a lab profile must be a mapping of fields",
                        "start from `kflab init`, which writes a commented lab.yaml")
    for key in data:
        if key not in _TOP:
            raise _unknown(doc, (), str(key), _TOP)
    if "provider" not in data:
        raise doc.error(("provider",), "missing (it is required)",
                        f"add `provider: ` with one of {', '.join(PROVIDERS)}")
    provider = _choice(doc, ("provider",), data["provider"], PROVIDERS)
    kw: dict[str, Any] = {"provider": provider, "source": file}
    if "name" in data:
        name = data["name"]
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise doc.error(("name",), f"{name!r} is not a usable lab name",
                            "lowercase letters, digits and dashes, at most 40, e.g. kflab")
        kw["name"] = name
    if "cpus" in data:
        kw["cpus"] = _int(doc, ("cpus",), data["cpus"], 2, 256, "")
    if "memory" in data:
        kw["memory"] = _int(doc, ("memory",), data["memory"], 4, 2048, " GiB")
    if "disk" in data:
        kw["disk"] = _int(doc, ("disk",), data["disk"], 20, 8192, " GiB")
    if "box" in data:
        box = _str(doc, ("box",), data["box"], "e.g. box: generic/debian12")
        if not re.match(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?$", box):
            raise doc.error(("box",), f"{box!r} is not a Vagrant box name",
                            "write it as ORG/NAME, e.g. generic/debian12")
        kw["box"] = box
    if "box_version" in data and data["box_version"] is not None:
        bv = data["box_version"]
        bv = str(bv) if isinstance(bv, int | float) and not isinstance(bv, bool) else bv
        if not isinstance(bv, str) or not re.match(r"^[0-9][0-9A-Za-z.<>=~ ,-]*$|^$", bv):
            raise doc.error(("box_version",), f"{bv!r} is not a box version",
                            "quote it, e.g. box_version: \"4.3.12\"")
        kw["box_version"] = bv
    if "gpu" in data:
        kw["gpu"] = _gpu(doc, data["gpu"], provider)
    if "components" in data:
        kw["components"] = _components(doc, data["components"])
    if "versions" in data:
        kw["versions"] = _versions(doc, data["versions"])
    if "offline" in data and data["offline"] not in (None, ""):
        off = _str(doc, ("offline",), data["offline"], "give the folder's path as text")
        base = Path(file).parent if file and not file.startswith("<") else Path.cwd()
        folder = (base / Path(off).expanduser()).resolve()
        if not folder.is_dir():
            raise doc.error(("offline",), f"folder {folder} does not exist",
                            "create it and put the pinned artifacts of manifests/versions.yaml "
                            "in it, or remove `offline`")
        kw["offline"] = str(folder)
    if "api_port" in data:
        kw["api_port"] = _int(doc, ("api_port",), data["api_port"], 1024, 65535, "")
    for key in ("kubeconfig", "context"):
        if key in data and data[key] is not None:
            if provider != "existing":
                raise doc.error((key,), f"only used by provider existing (this is {provider})",
                                f"remove `{key}`")
            kw[key] = _str(doc, (key,), data[key], f"give the {key} as text")
    if data.get("backend") is not None:
        kw["backend"] = _choice(doc, ("backend",), data["backend"], BACKENDS)
    if "vagrant" in data:
        if not provider.startswith("vagrant-"):
            raise doc.error(("vagrant",), f"only used by the Vagrant providers (this is "
                                          f"{provider})", "remove the `vagrant` section")
        kw["vagrant"] = _vagrant(doc, data["vagrant"])
    profile = Profile(**kw)
    if profile.provider == "vagrant-virtualbox" and \
            replace(profile.vagrant, box="") != VagrantOptions():
        raise doc.error(("vagrant",), "these options are for vagrant-libvirt",
                        "remove the `vagrant` section for VirtualBox")
    if profile.vagrant.isolated and profile.vagrant.network != "user":
        raise doc.error(("vagrant", "isolated"), "only possible with network: user",
                        "set vagrant.network: user or remove isolated")
    return profile


def parse(text: str, file: str = "<input>") -> Profile:
    docs = load_documents(text, file)
    if len(docs) > 1:
        raise InputError(file, None, f"expected one YAML document, found {len(docs)}",
                         hint="remove the extra `---` separators")
    doc = docs[0] if docs else Located({}, file)
    return validate(doc.data, file, doc)


def load(path: Path) -> Profile:
    return parse(read_text(path, hint="create one with `kflab init`"), str(path))


def resolve(path: str | None, provider: str | None) -> Profile:
    """The profile for a command: the file if there is one, else defaults for `--provider`."""
    file = Path(path or PROFILE_FILE)
    if exists(file):
        profile = load(file)
        if provider and provider != profile.provider:
            profile = profile.with_overrides(provider=provider)
        return profile
    if path:
        raise InputError(path, None, "no such lab profile", hint="create it with `kflab init`")
    if not provider:
        raise InputError(str(file), None, "no lab profile here",
                         hint="run `kflab init --provider ...` or pass --provider")
    return Profile(provider=provider)


def lab_namespace() -> str:
    """The namespace where scenario workloads run on a cluster (manifests/versions.yaml
    `lab_namespace`, shared with the Ansible roles)."""
    from lab.components.catalog import load

    return load().lab_namespace


def default_backend(path: str | None = None) -> str:
    """`backend:` of the lab profile (./lab.yaml or `path`), "" when unset or absent.
    A profile that fails validation is reported, never silently ignored."""
    file = Path(path or PROFILE_FILE)
    return load(file).backend if file.exists() else ""


def profile_to_data(p: Profile) -> dict[str, Any]:
    data: dict[str, Any] = {
        "provider": p.provider, "name": p.name, "cpus": p.cpus, "memory": p.memory,
        "disk": p.disk, "box": p.box, "gpu": list(p.gpu) if isinstance(p.gpu, tuple) else p.gpu,
        "components": list(p.components), "versions": dict(p.versions), "api_port": p.api_port,
    }
    if p.box_version:
        data["box_version"] = p.box_version
    if p.offline:
        data["offline"] = p.offline
    if p.provider == "existing":
        data["kubeconfig"], data["context"] = p.kubeconfig, p.context
    if p.backend:
        data["backend"] = p.backend
    if p.is_vagrant and p.vagrant != VagrantOptions():
        data["vagrant"] = dict(p.vagrant.__dict__)
    return data


# --- kflab init --------------------------------------------------------------------------

def write_init(path: Path, provider: str, *, force: bool = False) -> None:
    """`kflab init`: write a commented profile, never over an existing file unless forced."""
    if exists(path) and not force:
        raise LabError(f"{path} exists", hint="edit it, or pass --force to overwrite")
    try:
        path.write_text(init_text(provider))
    except (OSError, ValueError) as exc:
        raise InputError(str(path), None, f"cannot write: {getattr(exc, 'strerror', exc)}",
                         hint="give another -o path") from None


def init_text(provider: str) -> str:
    """A commented lab.yaml for `provider`; parse(init_text(p)) is Profile(provider=p)."""
    if provider not in PROVIDERS:
        raise InputError(None, "provider", f"{provider!r} is not a provider",
                         hint=f"one of {', '.join(PROVIDERS)}")
    d = Profile(provider=provider)
    vm = d.is_vagrant
    lines = [
        "# kflab lab profile. Check the host against it: kflab doctor; build the lab: kflab up",
        "# Every field is optional except provider; the values shown are the defaults.",
        "",
        "# Where the lab lives: vagrant-virtualbox | vagrant-libvirt (a VM), wsl2 (this WSL",
        "# distro), host (this Linux machine, with sudo), existing (a cluster you already have).",
        f"provider: {provider}",
        "",
        "# Lab name: the VM and the kubeconfig context are called after it.",
        f"name: {d.name}",
        "",
    ]
    if vm:
        lines += [
            "# Size of the VM. The full lab fits 4 CPUs / 8 GiB; the host needs ~2 GiB more.",
            f"cpus: {d.cpus}",
            f"memory: {d.memory}     # GiB",
            f"disk: {d.disk}       # GiB",
            "",
            "# Vagrant box (must exist for your provider); pin it with box_version: \"x.y.z\".",
            f"box: {d.box}",
            "",
        ]
    gpu_note = {
        "vagrant-virtualbox": "# VirtualBox cannot pass a GPU through: auto means a CPU-only lab.",
        "vagrant-libvirt": "# auto: pass every NVIDIA GPU bound to vfio-pci through to the VM;\n"
                           "# or list PCI addresses (lspci -D), e.g. gpu: [\"0000:01:00.0\"].",
        "wsl2": "# auto: use the GPU Windows shares with WSL (CUDA on WSL) when present.",
        "host": "# auto: use this machine's NVIDIA GPUs when the driver is loaded.",
        "existing": "# auto: use the GPUs the cluster's nodes already advertise.",
    }[provider]
    lines += [
        "# GPU: auto | off" + (" | a list of PCI addresses" if provider in
                                 ("vagrant-libvirt", "host") else ""),
        gpu_note,
        "gpu: auto",
        "",
        "# Kubeflow components to install (in this order; kserve needs cert-manager).",
        "components:",
        *[f"  - {c}" for c in COMPONENTS],
        "",
        "# Override a pinned version from manifests/versions.yaml (it must be pinned there:",
        "# `kflab components pin NAME=VERSION`).",
        "versions: {}",
        "",
        "# Folder of pre-downloaded artifacts for a classroom without network (\"\" = download).",
        "offline: \"\"",
        "",
        "# Where `kflab apply/get/scenario ...` run workloads: local (no cluster) or cluster",
        "# (this lab's Kubeflow). Unset: the lab once `kflab up` verified it, else local.",
        "# backend: cluster",
        "",
    ]
    if provider != "existing":
        lines += ["# Kubernetes API on this machine: https://127.0.0.1:<api_port>.",
                  f"api_port: {d.api_port}", ""]
    if provider == "existing":
        lines += ["# The cluster: a kubeconfig file and one of its contexts (\"\" = current).",
                  f"kubeconfig: {d.kubeconfig}", "context: \"\"", ""]
    if provider == "vagrant-libvirt":
        lines += [
            "# libvirt details (defaults suit a KVM host with libvirt's default network):",
            "# vagrant:",
            "#   libvirt_driver: kvm   # qemu = software emulation where KVM is missing (slow)",
            "#   network: managed      # user = qemu user-mode net, ports on 127.0.0.1 only",
            "#   isolated: false       # user network: no outbound traffic from the VM",
            "#   ssh_port: 2222        # user network: SSH on 127.0.0.1:<ssh_port>",
            "",
        ]
    return "\n".join(lines)
