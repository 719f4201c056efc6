"""Which package index the pipeline steps install from, and what it holds.

- `$KFLAB_PIP_INDEX_URL` (a proxy, a company mirror; `$KFLAB_PIP_TRUSTED_HOST` for a plain
  http one): every step installs from it; its contents are not known, so nothing is refused
  before the run;
- else the class index `kflab up --bundle` installed in the lab (lab/teaching/pipindex.py):
  the ConfigMap `kubeflow/kflab-pip-index` names its URL (the in-cluster Service) and the
  packages it holds, so a step needing a package it lacks is refused before the run;
- else none: steps install from PyPI, as KFP does by default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lab.errors import LabError

NAMESPACE = "kubeflow"  # where KFP single-user runs every step
NAME = "kflab-pip-index"  # the Deployment, Service and ConfigMap of the class index
PORT = 8080
HOST = f"{NAME}.{NAMESPACE}.svc.cluster.local"
URL = f"http://{HOST}/simple/"
ENV_URL, ENV_HOST = "KFLAB_PIP_INDEX_URL", "KFLAB_PIP_TRUSTED_HOST"
GLIBC = "2_36"  # python:3.11-slim is Debian 12: glibc 2.36 (manylinux_2_36 and older)
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass
class Target:
    """The Python and platform the steps run on (the labs' python:3.11-slim)."""

    python: str = "3.11"
    arch: str = "amd64"

    @property
    def platform(self) -> str:
        return f"manylinux_{GLIBC}_{MACHINES[self.arch]}"

    def env(self) -> dict[str, str]:
        """The marker environment of that Python (PEP 508), for requirements' markers."""
        return {"python_version": self.python, "python_full_version": f"{self.python}.0",
                "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "sys_platform": "linux", "os_name": "posix", "platform_system": "Linux",
                "platform_machine": MACHINES[self.arch]}

    def pip_args(self) -> list[str]:
        tag = self.python.replace(".", "")
        return ["--only-binary=:all:", "--platform", self.platform, "--python-version",
                self.python, "--implementation", "cp", "--abi", f"cp{tag}"]


@dataclass
class ClassIndex:
    """Where the steps install from, and what is there (None: not known, not checked)."""

    url: str
    trusted_hosts: list[str]
    packages: dict[str, list[str]] | None = None


def checked_url(url: str, where: str) -> str:
    """An index URL pip can use and a shell line cannot be bent by (it goes into the step's
    `sh -c` command): http(s), a host, no spaces or quotes."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or \
            any(c.isspace() or c in "'\"`$\\;&|<>()" for c in url):
        raise LabError(f"{where}: {url!r} is not a package index URL",
                       hint="give http(s)://HOST[:PORT]/PATH/, e.g. https://pypi.example.org/"
                            "simple/")
    return url if url.endswith("/") else url + "/"


def for_url(url: str, trusted_hosts: list[str] | None = None, *,
            where: str = "--index-url") -> ClassIndex:
    """An index given by URL; a plain-http one's host is trusted (pip refuses it else)."""
    url = checked_url(url, where)
    hosts = list(trusted_hosts or [])
    for h in hosts:
        checked_url(f"http://{h}/", "--trusted-host")
    if not hosts and urlsplit(url).scheme == "http":
        hosts = [urlsplit(url).netloc]
    return ClassIndex(url, hosts)


def class_index(kube: Any) -> ClassIndex | None:
    """The index the cluster backend points every step at (see the module docstring)."""
    from lab.kube.objects import Ref, get

    if os.environ.get(ENV_URL):
        host = os.environ.get(ENV_HOST)
        return for_url(os.environ[ENV_URL], [host] if host else None, where=ENV_URL)
    try:
        cm = get(kube, Ref("v1", "ConfigMap", NAME, NAMESPACE), missing_ok=True)
    except LabError:  # not allowed to read it (a student without the class Role): none
        return None
    if not cm:
        return None
    data = cm.get("data") or {}
    where = f"ConfigMap {NAMESPACE}/{NAME}"
    try:
        packages = json.loads(data.get("packages") or "{}")
    except ValueError:
        raise LabError(f"{where}: data.packages is not JSON",
                       hint="run `kflab up --bundle BUNDLE` again") from None
    index = for_url(str(data.get("url") or ""), [str(data.get("trusted-host") or HOST)],
                    where=where)
    index.packages = {str(k): [str(v) for v in vs] for k, vs in packages.items()} \
        if isinstance(packages, dict) else {}
    return index


def missing(requirements: list[str], packages: dict[str, list[str]],
            target: Target | None = None) -> list[str]:
    """The requirements the index cannot satisfy, each as `REQ (the index has ...)`."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    target = target or Target()
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            out.append(f"{text} (not a requirement pip reads from an index)")
            continue
        if req.marker is not None and not req.marker.evaluate(target.env()):
            continue
        have = packages.get(str(canonicalize_name(req.name)), [])
        ok = []
        for v in have:
            try:
                if req.specifier.contains(Version(v), prereleases=True):
                    ok.append(v)
            except InvalidVersion:
                continue
        if not ok:
            out.append(f"{text} (the index has "
                       + (f"{req.name} {', '.join(have)})" if have else f"no {req.name})"))
    return out


def dist_of(filename: str) -> tuple[str, str] | None:
    """(normalised project name, version) of a wheel or source archive file name."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return str(canonicalize_name(name)), str(version)


def probe(index: ClassIndex, names: list[str], timeout: float = 5.0) -> str | None:
    """Fill index.packages by asking the index for each project page (PEP 503: 404 = no such
    project); returns why it could not be asked (then packages stays None)."""
    import re
    import urllib.error
    import urllib.request

    from packaging.utils import canonicalize_name

    found: dict[str, list[str]] = {}
    for name in sorted({str(canonicalize_name(n)) for n in names}):
        try:
            with urllib.request.urlopen(index.url + name + "/", timeout=timeout) as resp:  # noqa: S310 - http(s) checked
                text = resp.read(4 << 20).decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                found[name] = []
                continue
            return f"{index.url} answered HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            return f"{index.url} did not answer ({getattr(exc, 'reason', exc)})"
        versions = set()
        for href in re.findall(r'href="([^"#]+)', text):
            dist = dist_of(href.rsplit("/", 1)[-1])
            if dist is not None:
                versions.add(dist[1])
        found[name] = sorted(versions)
    index.packages = found
    return None
