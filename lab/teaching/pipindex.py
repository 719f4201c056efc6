"""A package index for pipeline steps, for a class with no network.

Every KFP lightweight component pip-installs its `packages_to_install` and `kfp` itself when
its pod starts (kfp dsl/component_factory.py `_get_packages_to_install_command`): on a cluster
with no route to PyPI each step fails. KFP's own answer is the component options
`pip_index_urls` and `pip_trusted_hosts` (the same file: `make_index_url_options` writes
`--index-url URL --trusted-host HOST` into the install command); kflab compiles every step
with them (lab/backends/cluster/pipelines/compile.py) pointing at this index.

The index (PEP 503, the "simple" repository API) holds the wheels the labs' steps install
(lab/teaching/steps.py: each step's packages with their dependencies, and kfp at the version
that compiles for the lab's server, without dependencies as the step installs it), resolved
for the steps' Python (python:3.11-slim: CPython 3.11, glibc) and the class's architecture
with `pip download --only-binary=:all: --platform ... --python-version ...`. `kflab bundle
create` puts it in an image, a layer of static files on the bundle's own python:3.11-slim,
served by `python3 -m http.server` as a Deployment and Service in the lab (`kflab up
--bundle` applies them, with a ConfigMap naming the URL and the packages, which the cluster
backend reads to point every step at the index and to refuse, before a run, a step that
needs a package the index does not have).
"""

from __future__ import annotations

import email.parser
import hashlib
import html
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.backends.cluster.pipelines.index import (
    HOST,
    NAME,
    NAMESPACE,
    PORT,
    URL,
    Target,
    dist_of,
)
from lab.errors import LabError

ROOT = "kflab-index"  # the folder in the image: simple/ and files/
SERVER_IMAGE = "docker.io/library/python:3.11-slim"  # serves it; a labs' image already
IMAGE_REPO = "localhost/kflab/pip-index"  # localhost/: never pulled from anywhere
MAX_META = 1 << 20


def python_of(image: str) -> str:
    """The Python of a python:X.Y[-variant] image (else the labs' 3.11)."""
    m = re.search(r"(?:^|/)python:(\d+\.\d+)", image)
    return m.group(1) if m else "3.11"


def applicable(requirements: list[str], target: Target) -> list[str]:
    """The requirements whose markers hold on the target (pip skips the others)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise LabError(f"{text!r} is not a requirement pip reads",
                           hint="write name, name==version or name>=version") from None
        if req.marker is None or req.marker.evaluate(target.env()):
            out.append(text)
    return out


def _pip(args: list[str], what: str) -> None:
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.strip().splitlines() if x.startswith("ERROR")] or \
            proc.stderr.strip().splitlines() or ["?"]
        raise LabError(f"pip could not download {what}: {lines[-1]}",
                       hint="a package the steps install has no wheel for this Python and "
                            "platform, or the package index is out of reach")


def download(requirements: list[str], kfp_version: str, target: Target, into: Path) -> None:
    """The wheels the steps install: `requirements` with their dependencies, kfp alone."""
    into.mkdir(parents=True, exist_ok=True)
    reqs = applicable(requirements, target)
    if reqs:
        _pip([*target.pip_args(), "-d", str(into), *reqs], ", ".join(reqs))
    _pip([*target.pip_args(), "--no-deps", "-d", str(into), f"kfp=={kfp_version}"],
         f"kfp=={kfp_version}")


def _requires_python(wheel: Path) -> str | None:
    """Requires-Python from a wheel's METADATA (PEP 503's data-requires-python)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist()
                         if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
            if name is None or zf.getinfo(name).file_size > MAX_META:
                return None
            meta = email.parser.Parser().parsestr(zf.read(name).decode("utf-8", "replace"))
    except (OSError, zipfile.BadZipFile):
        return None
    return meta.get("Requires-Python")


def _dist(path: Path) -> tuple[str, str] | None:
    return dist_of(path.name)


def build(files: Path) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """The index as files (path under the image's /kflab-index -> bytes) and the packages it
    holds (normalised name -> versions). Links are relative (`../../files/NAME#sha256=`),
    so the same tree serves from any URL."""
    projects: dict[str, list[Path]] = {}
    out: dict[str, bytes] = {}
    for path in sorted(files.iterdir()):
        dist = _dist(path) if path.is_file() else None
        if dist is None:
            continue
        projects.setdefault(dist[0], []).append(path)
        out[f"{ROOT}/files/{path.name}"] = path.read_bytes()
    versions: dict[str, list[str]] = {}
    root_links = []
    for name, paths in sorted(projects.items()):
        links = []
        for path in paths:
            digest = hashlib.sha256(out[f"{ROOT}/files/{path.name}"]).hexdigest()
            rp = _requires_python(path) if path.name.endswith(".whl") else None
            attr = f' data-requires-python="{html.escape(rp)}"' if rp else ""
            links.append(f'    <a href="../../files/{html.escape(path.name)}#sha256={digest}"'
                         f"{attr}>{html.escape(path.name)}</a><br/>")
        page = (f"<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" "
                f"content=\"1.0\"><title>Links for {name}</title></head>\n  <body>\n"
                f"    <h1>Links for {name}</h1>\n" + "\n".join(links) + "\n  </body>\n</html>\n")
        out[f"{ROOT}/simple/{name}/index.html"] = page.encode()
        root_links.append(f'    <a href="{name}/">{name}</a><br/>')
        versions[name] = sorted({str(_dist(p)[1]) for p in paths})  # type: ignore[index]
    root = ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" "
            "content=\"1.0\"><title>kflab's class index</title></head>\n  <body>\n"
            + "\n".join(root_links) + "\n  </body>\n</html>\n")
    out[f"{ROOT}/simple/index.html"] = root.encode()
    return out, versions


def write(files: dict[str, bytes], dest: Path) -> Path:
    """The index as plain files under `dest` (tests, or a loopback server); dest/ROOT."""
    for rel, data in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest / ROOT


@dataclass
class Made:
    """An index image in a bundle: what bundle.json's `index` records."""

    image: str
    file: str
    digest: str
    python: str
    arch: str
    requirements: list[str]
    packages: dict[str, list[str]] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"image": self.image, "file": self.file, "digest": self.digest,
                "url": URL, "trusted_host": HOST, "python": self.python,
                "platform": f"linux/{self.arch}", "requirements": self.requirements,
                "packages": self.packages}


def make_image(base_archive: Path, images_dir: Path, requirements: list[str],
               kfp_version: str, target: Target) -> Made:
    """Download, index and layer the wheels on the server's image; the OCI archive goes in
    images_dir (k3s imports it with the others)."""
    from lab.teaching import oci

    with tempfile.TemporaryDirectory(prefix="kflab-index-") as tmp:
        download(requirements, kfp_version, target, Path(tmp))
        files, packages = build(Path(tmp))
    content = hashlib.sha256(json.dumps(
        {k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())}).encode())
    ref = f"{IMAGE_REPO}:{content.hexdigest()[:16]}"
    name = f"kflab-pip-index-{content.hexdigest()[:16]}.tar"
    digest = oci.add_layer(base_archive, images_dir / name, files, ref,
                           "kflab bundle create: the class package index (PEP 503)")
    return Made(ref, f"{images_dir.name}/{name}", digest, target.python, target.arch,
                sorted(requirements), packages)


# --- on the cluster -----------------------------------------------------------------------

def objects(index: dict[str, Any]) -> list[dict[str, Any]]:
    """The Deployment, Service and ConfigMap that serve a bundle's index in the lab."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "kflab"}
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": labels}
    container = {
        "name": "index", "image": index["image"], "imagePullPolicy": "IfNotPresent",
        # every address of the pod's own network namespace: reached through the Service
        "command": ["python3", "-m", "http.server", str(PORT), "--bind", "0.0.0.0",  # noqa: S104
                    "--directory", f"/{ROOT}"],
        # protocol spelled out: server-side apply keys ports by (port, protocol)
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/simple/", "port": PORT}},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"cpu": "500m", "memory": "128Mi"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}}}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
         "data": {"url": URL, "trusted-host": HOST, "python": str(index["python"]),
                  "platform": str(index["platform"]),
                  "packages": json.dumps(index["packages"], sort_keys=True)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [container],
                                        "automountServiceAccountToken": False}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": {"app.kubernetes.io/name": NAME},
                  "ports": [{"name": "http", "port": 80, "targetPort": PORT,
                             "protocol": "TCP"}]}},
    ]


def install(kube: Any, index: dict[str, Any]) -> list[str]:
    """Apply the index's objects (server-side apply); their kinds/names."""
    from lab.kube.objects import apply

    done = []
    for obj in objects(index):
        apply(kube, obj, manager="kflab-index", force=True)
        done.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return done
