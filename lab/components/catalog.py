"""Load manifests/versions.yaml: the pinned artifacts and the ordered component catalog."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO_ROOT / "manifests" / "versions.yaml"
OVERLAYS_DIR = REPO_ROOT / "manifests" / "overlays"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What each playbook role downloads (optional artifacts are used only when found offline).
ROLE_ARTIFACTS: dict[str, tuple[str, ...]] = {
    "k3s": ("k3s",),
    "gpu": ("nvidia-container-toolkit-key",),
    "kubeflow": ("kubeflow-manifests", "argo-workflows"),
}


@dataclass(frozen=True)
class Artifact:
    name: str
    version: str
    url: str
    file: str
    sha256: str | None
    optional: bool = False

    @property
    def pinned(self) -> bool:
        """True when a real checksum is recorded (the roles refuse unpinned artifacts)."""
        return self.sha256 is not None


@dataclass(frozen=True)
class Component:
    name: str
    version: str
    overlay: str
    requires: tuple[str, ...] = ()
    ready: tuple[str, ...] = ()  # namespace/name of Deployments that must be Available
    gpu_only: bool = False


@dataclass(frozen=True)
class Catalog:
    artifacts: dict[str, Artifact]
    components: tuple[Component, ...]
    images: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def unpinned(self, roles: list[str] | tuple[str, ...]) -> list[str]:
        """Artifacts these roles need that have no sha256 yet (the roles would refuse them)."""
        needed = [a for r in roles for a in ROLE_ARTIFACTS.get(r, ())]
        return [a for a in dict.fromkeys(needed)
                if a in self.artifacts and not self.artifacts[a].pinned]

    def get(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise InputError(None, "components", f"unknown component {name!r}",
                         hint=f"choose from: {', '.join(self.names())}")

    def select(self, wanted: list[str] | tuple[str, ...], *, gpu: bool = False) -> list[Component]:
        """The wanted components plus what they require, in install order."""
        chosen: set[str] = set()
        todo = list(wanted) + (["gpu"] if gpu and "gpu" in self.names() else [])
        while todo:
            comp = self.get(todo.pop())
            if comp.name not in chosen:
                chosen.add(comp.name)
                todo.extend(comp.requires)
        return [c for c in self.components if c.name in chosen]


def _need(doc: dict[str, Any], key: str, where: str, file: str, kind: type = str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind):
        raise InputError(file, f"{where}.{key}", f"expected a {kind.__name__}, got {value!r}",
                         hint="see the header of manifests/versions.yaml for the format")
    return value


def load(path: Path = VERSIONS_FILE) -> Catalog:
    """Parse and check versions.yaml; a bad entry names its field."""
    file = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(file, None, f"cannot read: {exc}") from exc
    if not isinstance(doc, dict):
        raise InputError(file, None, "expected a mapping at the top level")
    artifacts: dict[str, Artifact] = {}
    for name, a in _need(doc, "artifacts", "", file, dict).items():
        where = f"artifacts.{name}"
        if not isinstance(a, dict):
            raise InputError(file, where, "expected a mapping")
        sha = a.get("sha256")
        if sha is not None and not (isinstance(sha, str) and SHA256.match(sha)):
            raise InputError(file, f"{where}.sha256", f"not a sha256 hex digest: {sha!r}",
                             hint="64 lowercase hex characters, or null while not established")
        url = _need(a, "url", where, file)
        if not url.startswith(("https://", "http://127.0.0.1", "file://")):
            raise InputError(file, f"{where}.url", f"refusing a plain-http URL: {url}",
                             hint="use https:// (loopback http is allowed for tests)")
        artifacts[name] = Artifact(name, str(_need(a, "version", where, file, (str, int, float))),
                                   url, _need(a, "file", where, file), sha,
                                   bool(a.get("optional", False)))
    components = []
    for i, c in enumerate(_need(doc, "components", "", file, list)):
        where = f"components[{i}]"
        if not isinstance(c, dict):
            raise InputError(file, where, "expected a mapping")
        components.append(Component(
            name=_need(c, "name", where, file), version=str(c.get("version", "")),
            overlay=_need(c, "overlay", where, file),
            requires=tuple(c.get("requires") or ()), ready=tuple(c.get("ready") or ()),
            gpu_only=bool(c.get("gpu_only", False))))
    names = [c.name for c in components]
    for c in components:
        for r in c.requires:
            if r not in names or names.index(r) > names.index(c.name):
                raise InputError(file, f"components.{c.name}.requires",
                                 f"{r!r} must be a component listed before {c.name!r}")
    images = {k: tuple(v) for k, v in (doc.get("images") or {}).items()}
    return Catalog(artifacts, tuple(components), images)
