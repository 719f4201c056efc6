"""Load manifests/versions.yaml: the pinned artifacts and the ordered component catalog."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab import content
from lab.errors import InputError
from lab.kube.names import check_namespace

REPO_ROOT = content.root()  # the clone, or the copy a wheel carries (lab/content.py)
VERSIONS_FILE = REPO_ROOT / "manifests" / "versions.yaml"
OVERLAYS_DIR = REPO_ROOT / "manifests" / "overlays"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
GIT_ID = re.compile(r"^[0-9a-f]{40}$")
FINGERPRINT = re.compile(r"^[0-9A-F]{40}$")
ARCHES = ("amd64", "arm64")
KINDS = ("release", "git", "openpgp-key")
SCHEMA = 2
# Where a download may come from: TLS, or loopback http (test and mirror servers).
URL_OK = ("https://", "http://127.0.0.1:", "http://127.0.0.1/")
# A container image reference as registries parse it: [host[:port]/]path[:tag][@digest].
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = rf"(?:{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?/)"
IMAGE_RE = re.compile(rf"^{_HOST}?{_PART}(?:/{_PART})*(?::[\w][\w.-]{{0,127}})?"
                      r"(?:@sha256:[0-9a-f]{64})?$")
DEFAULT_LAB_NAMESPACE = "kflab-lab"
# What each playbook role downloads (optional artifacts are used only when found offline).
ROLE_ARTIFACTS: dict[str, tuple[str, ...]] = {
    "k3s": ("k3s",),
    "gpu": ("nvidia-container-toolkit-key",),
    "kubeflow": ("kubeflow-manifests", "argo-workflows", "jobset"),
}


def versions_file() -> Path:
    """The pins in use: manifests/versions.yaml, or KFLAB_VERSIONS_FILE (a maintainer trying a
    file that `kflab components pin --file` wrote, before committing it)."""
    override = os.environ.get("KFLAB_VERSIONS_FILE")
    return Path(override).expanduser().resolve() if override else VERSIONS_FILE


GITHUB = "https://github.com"


def github_url() -> str:
    """Where GitHub downloads come from: https://github.com, or KFLAB_GITHUB_URL (a mirror,
    or a loopback test server). The pins stay the same, so a mirror cannot change a byte."""
    url = os.environ.get("KFLAB_GITHUB_URL", GITHUB).rstrip("/")
    if not url.startswith(URL_OK) or any(c.isspace() for c in url):
        raise InputError("KFLAB_GITHUB_URL", None, f"refusing {url!r}",
                         hint="an https:// URL, or http://127.0.0.1:PORT for a loopback server")
    return url


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release for one architecture, and the release's checksum file."""

    arch: str
    url: str
    file: str
    sha256: str | None
    checksums: str  # URL of the release's sha256sum file that must list `sha256` for `file`


@dataclass(frozen=True)
class Artifact:
    name: str
    kind: str  # one of KINDS
    version: str = ""
    url: str = ""  # git, openpgp-key (a release has one per architecture)
    file: str = ""
    optional: bool = False
    arch: dict[str, ReleaseFile] = field(default_factory=dict)  # release
    commit: str | None = None  # git
    tree: str | None = None  # git
    fingerprint: str | None = None  # openpgp-key

    def missing(self) -> list[str]:
        """Pin fields still null (the roles refuse the artifact until they are set)."""
        if self.kind == "release":
            return [f"arch.{a}.sha256" for a, f in self.arch.items() if f.sha256 is None]
        if self.kind == "git":
            return [k for k in ("commit", "tree") if getattr(self, k) is None]
        return [] if self.fingerprint else ["fingerprint"]

    @property
    def pinned(self) -> bool:
        return not self.missing()


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
    lab_namespace: str = DEFAULT_LAB_NAMESPACE  # where scenario workloads run on a cluster

    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def unpinned(self, roles: list[str] | tuple[str, ...]) -> list[str]:
        """Artifacts these roles need whose pin is incomplete (the roles would refuse them)."""
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


def _pin(doc: dict[str, Any], key: str, where: str, file: str, pattern: re.Pattern,
         what: str) -> str | None:
    value = doc.get(key)
    if value is not None and not (isinstance(value, str) and pattern.match(value)):
        raise InputError(file, f"{where}.{key}", f"not {what}: {value!r}",
                         hint=f"{what}; `kflab components pin` computes it")
    return value


def _url(doc: dict[str, Any], key: str, where: str, file: str) -> str:
    url = _need(doc, key, where, file)
    if not url.startswith(URL_OK):
        raise InputError(file, f"{where}.{key}", f"refusing a plain-http URL: {url}",
                         hint="use https:// (loopback http is allowed for tests)")
    return url


def _file_name(doc: dict[str, Any], where: str, file: str) -> str:
    """The name in an offline folder: a plain file name, never a path."""
    fname = _need(doc, "file", where, file)
    if "/" in fname or fname in ("", ".", ".."):
        raise InputError(file, f"{where}.file", f"not a plain file name: {fname!r}")
    return fname


def _artifact(name: str, a: Any, file: str) -> Artifact:
    where = f"artifacts.{name}"
    if not isinstance(a, dict):
        raise InputError(file, where, "expected a mapping")
    kind = a.get("kind")
    if kind not in KINDS:
        raise InputError(file, f"{where}.kind", f"expected one of {', '.join(KINDS)}, "
                         f"got {kind!r}", hint="see the header of manifests/versions.yaml")
    version = str(a.get("version", "")) if kind == "openpgp-key" else \
        str(_need(a, "version", where, file, (str, int, float)))
    optional = bool(a.get("optional", False))
    if kind == "release":
        arches = _need(a, "arch", where, file, dict)
        if not arches or set(arches) - set(ARCHES):
            raise InputError(file, f"{where}.arch", f"expected entries for {', '.join(ARCHES)}"
                             f", got {sorted(map(str, arches))!r}")
        files = {}
        for arch, f in arches.items():
            w = f"{where}.arch.{arch}"
            if not isinstance(f, dict):
                raise InputError(file, w, "expected a mapping")
            url, fname = _url(f, "url", w, file), _file_name(f, w, file)
            if not url.endswith("/" + fname):
                raise InputError(file, f"{w}.file", f"{fname!r} is not the file {url} names",
                                 hint="a release's checksum file lists its assets by name")
            files[arch] = ReleaseFile(arch, url, fname,
                                      _pin(f, "sha256", w, file, SHA256, "a sha256 hex digest"),
                                      _url(f, "checksums", w, file))
        return Artifact(name, kind, version, optional=optional, arch=files)
    url, fname = _url(a, "url", where, file), _file_name(a, where, file)
    if kind == "git":
        commit = _pin(a, "commit", where, file, GIT_ID, "a 40-hex git commit id")
        if commit and commit not in url:
            raise InputError(file, f"{where}.url", f"does not fetch commit {commit}",
                             hint="git sources are fetched by commit: .../archive/COMMIT.tar.gz")
        return Artifact(name, kind, version, url, fname, optional, commit=commit,
                        tree=_pin(a, "tree", where, file, GIT_ID, "a 40-hex git tree id"))
    return Artifact(name, kind, version, url, fname, optional, fingerprint=_pin(
        a, "fingerprint", where, file, FINGERPRINT, "an OpenPGP v4 fingerprint (40 upper hex)"))


def load(path: Path | None = None) -> Catalog:
    """Parse and check versions.yaml; a bad entry names its field."""
    path = path or versions_file()
    file = str(path)
    try:
        # libyaml's safe loader where PyYAML has it: every kflab command reads this file
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        doc = yaml.load(path.read_text(), Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(file, None, f"cannot read: {exc}") from exc
    if not isinstance(doc, dict):
        raise InputError(file, None, "expected a mapping at the top level")
    if doc.get("schema") != SCHEMA:
        raise InputError(file, "schema", f"expected {SCHEMA}, got {doc.get('schema')!r}",
                         hint="this kflab reads the layout described in the file's header")
    artifacts = {name: _artifact(name, a, file)
                 for name, a in _need(doc, "artifacts", "", file, dict).items()}
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
    namespace = check_namespace(doc.get("lab_namespace", DEFAULT_LAB_NAMESPACE), file=file,
                                field="lab_namespace")
    return Catalog(artifacts, tuple(components), _images(doc.get("images"), file), namespace)


def _images(node: Any, file: str) -> dict[str, tuple[str, ...]]:
    """`images:` as top-level key -> every image string below it, in order, whatever the
    nesting (a list, a mapping of role -> image, deeper mappings); each must be an image."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise InputError(file, "images", "expected a mapping of group -> images")
    return {str(key): tuple(_image_strings(value, file, f"images.{key}"))
            for key, value in node.items()}


def _image_strings(node: Any, file: str, path: str) -> list[str]:
    if isinstance(node, str):
        if not IMAGE_RE.match(node):
            raise InputError(file, path, f"not a container image reference: {node!r}",
                             hint="write [registry/]name:tag or name@sha256:<digest>")
        return [node]
    if isinstance(node, list):
        return [i for n, item in enumerate(node) for i in _image_strings(item, file,
                                                                         f"{path}[{n}]")]
    if isinstance(node, dict):
        return [i for key, item in node.items() for i in _image_strings(item, file,
                                                                         f"{path}.{key}")]
    raise InputError(file, path, f"expected an image, a list or a mapping, got {node!r}")
