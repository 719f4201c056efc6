"""What kflab knows about the pinned release without a manifests tree: each component's
footprint and images, computed once from the pinned kubeflow/manifests (and JobSet) trees by
`scripts/release_data.py` and shipped as manifests/release-data.json.

So an instructor sizes a class (`kflab class plan`) or makes a bundle (`kflab bundle create`)
without downloading a repository first; `--upstream TREE` still recomputes from a tree. The
file names the pins it was made from: a versions.yaml whose kubeflow-manifests pin moved
makes it stale, and it is refused (tests/unit/test_release_data.py recomputes it from the
tree in ../shared/upstream and compares).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from lab import content
from lab.components.footprint import Footprint
from lab.errors import LabError

FILE = "release-data.json"
FORMAT = 1
_FP = ("cpu_requests", "memory_requests", "cpu_limits", "memory_limits")


def data_file() -> Path:
    return content.manifests_dir() / FILE


def pins() -> dict[str, str]:
    """The pins the data depends on: the manifests and JobSet trees' commits."""
    from lab.components.catalog import load

    arts = load().artifacts
    return {name: str(arts[name].commit) for name in ("kubeflow-manifests", "jobset")
            if name in arts}


def _fp_dict(fp: Footprint) -> dict[str, Any]:
    return {**{k: str(getattr(fp, k)) for k in _FP}, "pods": fp.pods,
            "unbounded": fp.unbounded}


def _fp(data: dict[str, Any]) -> Footprint:
    return Footprint(**{k: Decimal(data[k]) for k in _FP}, pods=int(data["pods"]),
                     unbounded=int(data["unbounded"]))


def compute(upstream: Path) -> dict[str, Any]:
    """The data, rendered from an upstream tree (kubectl kustomize)."""
    from lab.components.catalog import load
    from lab.components.footprint import footprint
    from lab.components.images import Image, collect, object_images, runtime_uses
    from lab.components.render import render

    out: dict[str, Any] = {"format": FORMAT, "made_by": "scripts/release_data.py",
                           "pins": pins(), "components": {}}
    for comp in load().components:
        objects = render(comp.overlay, upstream)
        found: dict[str, Image] = {}
        for obj in objects:
            collect(found, object_images(obj), comp.name, runtime_uses(obj))
        out["components"][comp.name] = {
            "version": comp.version, "footprint": _fp_dict(footprint(objects)),
            "images": [found[k].as_dict() for k in sorted(found)]}
    return out


def load() -> dict[str, Any]:
    """The shipped data; refused when it was made from other pins than versions.yaml's."""
    path = data_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: cannot read kflab's release data ({exc})",
                       hint="reinstall kflab, or give --upstream TREE") from None
    if data.get("format") != FORMAT or data.get("pins") != pins():
        raise LabError(f"{path} was made for other pins ({data.get('pins')}) than "
                       f"versions.yaml's ({pins()})",
                       hint="maintainers: python3 scripts/release_data.py --upstream TREE; "
                            "or give --upstream TREE")
    return data


def component_names(names: tuple[str, ...] = ()) -> list[str]:
    from lab.components.catalog import load as catalog

    cat = catalog()
    chosen = cat.select(names) if names else [c for c in cat.components if not c.gpu_only]
    return [c.name for c in chosen]


def footprint_rows(names: tuple[str, ...] = ()) -> list[tuple[str, Footprint]]:
    """lab_footprint's rows, from the shipped data."""
    comps = load()["components"]
    rows, total = [], Footprint()
    for name in component_names(names):
        fp = _fp(comps[name]["footprint"])
        total += fp
        rows.append((name, fp))
    return [*rows, ("total", total)]


def images(gpu: bool = False) -> list[Any]:
    """lab_images's list, from the shipped data (versions.yaml's images added now)."""
    from lab.components.catalog import load as catalog
    from lab.components.images import Image, add_catalog

    cat = catalog()
    comps = load()["components"]
    found: dict[str, Image] = {}
    for comp in cat.components:
        if comp.gpu_only and not gpu:
            continue
        for entry in comps[comp.name]["images"]:
            img = found.setdefault(entry["image"], Image(entry["image"]))
            img.sources += [s for s in entry["sources"] if s not in img.sources]
            img.uses += [u for u in entry["uses"] if u not in img.uses]
    add_catalog(found, cat, gpu)
    return [found[k] for k in sorted(found)]
