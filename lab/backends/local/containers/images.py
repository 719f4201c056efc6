"""Images: which ones kflab runs as a local process, names, pull policy, pulls and inspection.

An image runs as a local process when it is a Python base kflab knows (the official python,
pytorch and tensorflow images, Kubeflow's notebook images) -- the process then gets the
lab's own Python and ML stack, as the scenarios expect -- and in a container of that very
image otherwise (DESIGN.md, the local backend).

Pull policy is the kubelet's (k8s.io/kubernetes pkg/kubelet/images/image_manager.go
`EnsureImageExists`, and the API default in pkg/apis/core/v1/defaults.go
`SetDefaults_Container`: `Always` for a `:latest` or untagged image without a digest, else
`IfNotPresent`): Never refuses a missing image, IfNotPresent pulls only a missing one, Always
pulls once per kflab command (the engine downloads only the layers it lacks; the kubelet
also asks the registry on every pod start, and a job's replicas start together). The
SDK's ContainerBackend does the same three (utils.py `maybe_pull_image`); kflab adds the
progress bar, the default by tag, and the architecture check.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.backends.local.containers.engine import Engine, go_arch, last_line
from lab.errors import LabError

POLICIES = ("Always", "IfNotPresent", "Never")
# Repositories (registry/path, without tag) whose images run as local processes.
LOCAL_REPOSITORIES = (
    "docker.io/library/python",
    "docker.io/pytorch/pytorch",
    "docker.io/tensorflow/tensorflow",
)
# Kubeflow's notebook images (jupyter, jupyter-scipy, jupyter-pytorch...): JupyterLab runs
# locally (notebooks/handler.py).
LOCAL_PREFIXES = (
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter",
    "docker.io/kubeflownotebookswg/jupyter",
)
_REF = re.compile(r"^(?P<name>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                  r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
                  r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")
_HOST = re.compile(r"^(?:localhost|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+|[a-zA-Z0-9-]+:[0-9]+|"
                   r"[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*:[0-9]+|\[[0-9a-fA-F:]+\](?::[0-9]+)?)$")


@dataclass(frozen=True)
class Ref:
    """A parsed image reference, fully qualified as both engines accept it."""

    registry: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse(image: str) -> Ref | None:
    """`python:3.11` -> docker.io/library/python:3.11 (None when it is not a reference)."""
    if not isinstance(image, str) or not image or len(image) > 512 or image != image.strip():
        return None
    first, sep, rest = image.partition("/")
    registry = "docker.io"
    if sep and _HOST.match(first) and ("." in first or ":" in first or first == "localhost"
                                       or first.startswith("[")):
        registry, image = first, rest
    m = _REF.match(image)
    if m is None:
        return None
    path = m.group("name")
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    tag, digest = m.group("tag"), m.group("digest")
    if tag is None and digest is None:
        tag = "latest"
    return Ref(registry, path, tag, digest)


def runs_locally(image: Any) -> bool:
    """Whether kflab runs this image's workload as a local process (a Python base it knows;
    a container without an image too, as before)."""
    if image is None or image == "":
        return True
    ref = parse(str(image))
    if ref is None:
        return False
    return ref.repository in LOCAL_REPOSITORIES or any(
        ref.repository.startswith(p) for p in LOCAL_PREFIXES)


def default_policy(image: str) -> str:
    """The API server's default imagePullPolicy for this image."""
    ref = parse(image)
    if ref is not None and ref.digest is None and ref.tag == "latest":
        return "Always"
    return "IfNotPresent"


@dataclass(frozen=True)
class Image:
    """What the engine says about a local image (`image inspect`)."""

    ref: str
    id: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    workdir: str
    arch: str
    os: str


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def inspect(engine: Engine, ref: str) -> Image | None:
    """The local image, or None when the engine does not have it."""
    done = engine.run("image", "inspect", ref, timeout=60)
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return None
    item = data[0] if isinstance(data, list) and data else {}
    config = item.get("Config") or {}
    return Image(ref, str(item.get("Id") or ""), _strings(config.get("Entrypoint")),
                 _strings(config.get("Cmd")), str(config.get("WorkingDir") or ""),
                 str(item.get("Architecture") or ""), str(item.get("Os") or ""))


Emit = Callable[[dict[str, Any]], None]
_LAYER = re.compile(r"(?:Copying blob (?:sha256:)?(?P<pblob>[0-9a-f]{6,})"
                    r"|^(?P<dblob>[0-9a-f]{12}): (?P<dstate>[A-Za-z ]+))")


def pull(engine: Engine, ref: str, emit: Emit | None, why: str) -> None:
    """`engine pull REF`, its layers reported as `pull` events (the CLI draws a bar):
    Podman prints `Copying blob X` per layer (on a terminal `... done` too; without one,
    `Copying config` once every layer is in), Docker `X: Pulling fs layer` ...
    `X: Pull complete`/`Already exists`."""
    seen: set[str] = set()
    done: set[str] = set()
    tail: list[str] = []
    if emit:
        emit({"event": "pull", "image": ref, "done": 0, "total": 0, "why": why})
    try:
        proc = subprocess.Popen(engine.argv("pull", ref), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise LabError(f"cannot run {engine.path}: {exc.strerror or exc}") from None
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode(errors="replace").strip()
        if not line:
            continue
        tail = [*tail[-4:], line]
        m = _LAYER.search(line)
        if line.startswith(("Copying config", "Writing manifest")):
            done |= seen  # Podman without a terminal says no more per layer: all are in
        elif m is None:
            continue
        else:
            blob = (m.group("pblob") or m.group("dblob"))[:12]
            seen.add(blob)
            state = m.group("dstate") or ""
            if line.endswith((" done", "already exists")) or state in (
                    "Pull complete", "Already exists"):
                done.add(blob)
        if emit:
            emit({"event": "pull", "image": ref, "done": len(done), "total": len(seen),
                  "why": why})
    code = proc.wait()
    if code != 0:
        raise LabError(f"cannot pull image {ref} ({why}): "
                       f"{last_line(chr(10).join(tail))}",
                       hint="check the image name and the network, or pull it yourself "
                            f"(`{engine.name} pull {ref}`)")
    if emit:
        emit({"event": "pulled", "image": ref, "layers": len(seen)})


_ENSURED: dict[tuple[str, str], Image] = {}
_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_GUARD = threading.Lock()


def ensure(engine: Engine, image: str, policy: str, *, where: str,
           emit: Emit | None = None) -> Image:
    """The image, present and for this machine's architecture, as `policy` asks; pulled at
    most once per kflab process and image. Raises LabError with one line naming the cause
    (and `where`, the field that names the image)."""
    ref = parse(image)
    if ref is None:
        raise LabError(f"{where}: {image!r} is not an image reference",
                       hint="write it as [registry/]name[:tag], e.g. python:3.11-slim")
    if policy not in POLICIES:
        raise LabError(f"{where}: imagePullPolicy {policy!r} is not Always, IfNotPresent "
                       "or Never", hint="use one of Always, IfNotPresent, Never")
    key = (engine.path, str(ref))
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        if key in _ENSURED:  # pulled (or found) by this process already: once is enough
            return _ENSURED[key]
        found = None if policy == "Always" else inspect(engine, str(ref))
        if found is None and policy == "Never":
            raise LabError(f"{where}: image {image} is not present and imagePullPolicy is "
                           "Never, so it is not pulled (as the kubelet's ErrImageNeverPull)",
                           hint=f"load it first (`{engine.name} pull {ref}` or "
                                f"`{engine.name} load`), or set imagePullPolicy: "
                                "IfNotPresent")
        if found is None:
            pull(engine, str(ref), emit, f"imagePullPolicy {policy}")
            found = inspect(engine, str(ref))
            if found is None:
                raise LabError(f"{where}: {engine.title} pulled {ref} but cannot inspect it")
        check_arch(engine, found, where)
        if policy == "Always":  # asked again, a present image is inspected, not remembered
            _ENSURED[key] = found
        return found


def preflight(engine: Engine, image: str, policy: str, *, where: str) -> None:
    """What `ensure` would refuse without pulling anything (`kflab apply` checks every
    document before applying the first): a missing image under Never, a present image
    built for another architecture."""
    ref = parse(image)
    if ref is None or policy not in POLICIES or policy == "Always":
        return  # ensure says what is wrong with the name or the policy; Always pulls
    if (engine.path, str(ref)) in _ENSURED:
        return
    found = inspect(engine, str(ref))
    if found is None and policy == "Never":
        ensure(engine, image, policy, where=where)  # raises ErrImageNeverPull's line
    if found is not None:
        check_arch(engine, found, where)


def check_arch(engine: Engine, image: Image, where: str) -> None:
    """Refuse an image built for another architecture (the engine would start it and the
    kernel refuse its programs: `exec format error`)."""
    want = engine.arch or go_arch(platform.machine())
    have = image.arch
    if have and want and have != want:
        raise LabError(f"{where}: image {image.ref} is built for {image.os or 'linux'}/{have}, "
                       f"and this machine runs {want} images",
                       hint=f"use a tag built for {want} (most official images are "
                            "multi-architecture), or build the image here")


def forget() -> None:
    """Ask the engine again (tests, or after `podman rmi`)."""
    with _GUARD:
        _ENSURED.clear()
