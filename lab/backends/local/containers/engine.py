"""Which container engine runs images here -- Podman or Docker -- and how to call its CLI.

Both upstream runners this follows talk to an engine's API through a Python client (kfp.local's
DockerRunner: `docker`; the Kubeflow SDK 0.5.0's ContainerBackend: `docker` or `podman`).
Podman's client needs `podman system service` listening, which a plain (and a rootless)
install does not start; both CLIs work wherever the engines do. So kflab drives the CLI, with
argv lists (never a shell), and parses its JSON.

The choice: `$KFLAB_CONTAINER_ENGINE` (`podman`, `docker`, or `none` for no engine at all),
else the first of Docker and Podman that answers -- the SDK's ContainerBackend order
(backend.py `_create_adapter`: Docker first, then Podman) -- else the first installed one,
which then says why it cannot run containers (a Docker daemon that is not running, a Podman
machine that is stopped) in one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError

ENV = "KFLAB_CONTAINER_ENGINE"
ORDER = ("docker", "podman")
TITLES = {"docker": "Docker", "podman": "Podman"}
INSTALL = "install Podman (`sudo apt-get install podman`) or Docker"
# Go's architecture names (what image configs and `podman info` say) for uname's.
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386",
        "i386": "386", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
PROBE_TIMEOUT = 20.0

Which = Callable[[str], str | None]
Run = Callable[[list[str], float], tuple[int, str, str]]


@dataclass(frozen=True)
class Engine:
    """One engine's CLI, as probed: installed, and whether it can run containers now."""

    name: str  # podman | docker
    path: str  # the CLI binary
    version: str = "?"
    rootless: bool = False
    running: bool = True
    problem: str = ""  # why it cannot run containers now (one line), when not running
    arch: str = ""  # the architecture it runs images for (Go's names: amd64, arm64)
    selinux: bool = False  # bind mounts need relabelling (`:z`, as kfp.local's DockerRunner)
    cgroups: str = ""  # v1 | v2 (rootless engines cannot set limits on v1)

    @property
    def limits(self) -> bool:
        """Whether --cpus/--memory take effect (not for a rootless engine on cgroups v1:
        Podman ignores them there with a warning, Docker refuses them)."""
        return not (self.rootless and self.cgroups == "v1")

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    @property
    def label(self) -> str:
        """`Podman 4.3.1 (rootless)`, as doctor and messages show it."""
        mode = "rootless" if self.rootless else "rootful"
        return f"{self.title} {self.version} ({mode})"

    def argv(self, *args: str) -> list[str]:
        return [self.path, *args]

    def run(self, *args: str, timeout: float = 120.0,
            check: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run one CLI command and capture its output. With `check` (what it was doing), a
        failure raises LabError with the engine's own last line."""
        try:
            done = subprocess.run(self.argv(*args), capture_output=True, text=True,
                                  timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LabError(f"{self.title} did not answer `{args[0]}` within "
                           f"{timeout:.0f}s" + (f" ({check})" if check else "")) from None
        except OSError as exc:
            raise LabError(f"cannot run {self.path}: {exc.strerror or exc}") from None
        if check and done.returncode != 0:
            raise LabError(f"{self.title} failed {check}: {last_line(done.stderr)}")
        return done


def last_line(text: str) -> str:
    """The engine's message without its prefixes (`Error: `, `level=...`)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    line = lines[-1] if lines else "no message"
    for prefix in ("Error: ", "error: ", "Error response from daemon: "):
        line = line.removeprefix(prefix)
    return line


def go_arch(machine: str) -> str:
    return ARCH.get(machine.lower(), machine.lower())


def _default_run(argv: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 124, "", f"no answer within {timeout:.0f}s"
    except OSError as exc:
        return 127, "", str(exc.strerror or exc)
    return done.returncode, done.stdout, done.stderr


def _json(text: str) -> Any:
    """The first JSON value in the output (a warning line may come before or after it)."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def probe(name: str, which: Which = shutil.which, run: Run = _default_run) -> Engine | None:
    """The engine `name` as installed here, or None when its CLI is not on PATH."""
    path = which(name)
    if path is None:
        return None
    path = str(path)
    if name == "podman":
        code, out, err = run([path, "info", "--format", "json"], PROBE_TIMEOUT)
        info = _json(out) if code == 0 else None
        if isinstance(info, dict):
            host, ver = info.get("host") or {}, info.get("version") or {}
            security = host.get("security") or {}
            return Engine("podman", path, str(ver.get("Version") or "?"),
                          bool(security.get("rootless")), True, "",
                          str(host.get("arch") or ""), bool(security.get("selinuxEnabled")),
                          str(host.get("cgroupVersion") or ""))
        _, vout, _ = run([path, "--version"], PROBE_TIMEOUT)
        version = vout.split()[-1] if vout.split() else "?"
        return Engine("podman", path, version, os.geteuid() != 0, False,
                      f"Podman is installed but cannot run containers: {last_line(err)}")
    code, out, err = run([path, "version", "--format", "{{json .}}"], PROBE_TIMEOUT)
    data = _json(out) or {}
    client = (data.get("Client") or {}) if isinstance(data, dict) else {}
    server = (data.get("Server") or {}) if isinstance(data, dict) else {}
    version = str(server.get("Version") or client.get("Version") or "?")
    if code != 0 or not server:
        return Engine("docker", path, version, False, False,
                      f"Docker is installed but its daemon is not running: {last_line(err)}")
    code, out, _ = run([path, "info", "--format", "{{json .}}"], PROBE_TIMEOUT)
    info = _json(out) if code == 0 else None
    info = info if isinstance(info, dict) else {}
    options = [str(o) for o in info.get("SecurityOptions") or []]
    return Engine("docker", path, version, any("rootless" in o for o in options), True, "",
                  go_arch(str(info.get("Architecture") or "")),
                  any("selinux" in o for o in options),
                  f"v{info.get('CgroupVersion')}" if info.get("CgroupVersion") else "")


def describe(engine: Engine | None) -> tuple[str, str, str]:
    """(status, observed, advice) for `kflab doctor`'s row."""
    if engine is None:
        return ("warn", "none: workloads whose image kflab does not run as a process are "
                "refused", f"{INSTALL}; `{ENV}=none` means none on purpose")
    where = f"{engine.path}" if engine.path else "not installed"
    if not engine.running:
        other = "docker" if engine.name == "podman" else "podman"
        return ("warn", f"{engine.title} {engine.version}, not running ({where}): "
                f"{engine.problem}", f"start {engine.title}, or set {ENV}={other}")
    arch = f", {engine.arch}" if engine.arch else ""
    if not engine.limits:
        return ("pass", f"{engine.label}, running{arch}, cgroups {engine.cgroups}: cpu and "
                f"memory limits are not applied ({where})",
                "cgroups v2 lets a rootless engine apply limits")
    return ("pass", f"{engine.label}, running{arch} ({where})", "")


def select(env: Mapping[str, str] | None = None, which: Which = shutil.which,
           run: Run = _default_run) -> Engine | None:
    """The engine kflab uses here (see the module docstring); None when there is none."""
    env = os.environ if env is None else env
    choice = (env.get(ENV) or "auto").strip().lower()
    if choice in ("none", "off"):
        return None
    if choice in ORDER:
        found = probe(choice, which, run)
        return found or Engine(choice, "", running=False,
                               problem=f"{ENV}={choice} but {choice} is not installed "
                                       "(not on PATH)")
    if choice != "auto":
        raise LabError(f"{ENV}={choice!r} is not an engine kflab knows",
                       hint="set it to podman, docker or none (or unset it)")
    found = [e for e in (probe(n, which, run) for n in ORDER) if e is not None]
    return next((e for e in found if e.running), found[0] if found else None)


_CACHE: dict[tuple[str, ...], Engine | None] = {}
_LOCK = threading.Lock()
_KEYS = (ENV, "PATH", "DOCKER_HOST", "CONTAINER_HOST", "CONTAINERS_CONF", "DOCKER_CONTEXT")


def current() -> Engine | None:
    """`select()` for this process's environment, probed once (the probe takes a moment)."""
    key = tuple(os.environ.get(k, "") for k in _KEYS)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = select()
        return _CACHE[key]


def forget() -> None:
    """Probe again next time (an engine was started or installed meanwhile)."""
    with _LOCK:
        _CACHE.clear()


def require(what: str) -> Engine:
    """The engine to run `what` (e.g. "image 'x' of PyTorchJob/default/mnist master-0"),
    or a LabError that names the engine that would run it and why it cannot."""
    engine = current()
    if engine is None:
        off = (os.environ.get(ENV) or "").strip().lower() in ("none", "off")
        raise LabError(f"{what} runs in a container, and "
                       + (f"{ENV}={os.environ.get(ENV)} turns container engines off"
                          if off else "no container engine is installed here")
                       + ": kflab runs it with Podman or Docker",
                       hint=f"{INSTALL} (`kflab doctor` shows what kflab finds)"
                       if not off else f"unset {ENV}")
    if not engine.running:
        other = "docker" if engine.name == "podman" else "podman"
        raise LabError(f"{what} runs in a container: {engine.problem}",
                       hint=f"start {engine.title}, or set {ENV}={other} "
                            "(`kflab doctor` shows what kflab finds)")
    return engine
