"""`kflab notebook compile`: a tagged Jupyter notebook becomes a KFP pipeline file.

tags.py reads the notebook (nbformat, validated; never executed) into a plan of steps;
codegen.py writes the plan as a pipeline file that `kflab pipeline run` runs on the local
backend or a cluster. The notebook's own settings live in its metadata under `kflab`:
`packages` (what each step's container installs on a cluster), `base_image` and
`pipeline_name`; command-line options win.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.errors import InputError

DEFAULT_IMAGE = "docker.io/library/python:3.11-slim"  # the labs' image (manifests/versions.yaml)
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?"
                      r"((==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+"
                      r"(,(==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+)*)?$")
_IMAGE = re.compile(r"^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass
class Compiled:
    path: Path
    name: str
    steps: list[str]
    parameters: dict[str, Any]
    metrics: list[str]
    warnings: list[str]


def _settings(nb: Any, file: str) -> dict[str, Any]:
    raw = (nb.get("metadata") or {}).get("kflab") or {}
    if not isinstance(raw, dict):
        raise InputError(file, "metadata.kflab", "expected a mapping",
                         hint='e.g. "kflab": {"packages": ["scikit-learn"]}')
    return raw


def _packages(value: Any, where: str, file: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise InputError(file, where, "expected a list of package names",
                         hint='e.g. ["scikit-learn", "pandas>=2"]')
    for p in value:
        if not _PACKAGE.match(p) or len(p) > 200:
            raise InputError(file, where, f"{p!r} is not a package requirement",
                             hint='a name with an optional version: "scikit-learn>=1.5"')
    return list(value)


def default_name(stem: str) -> str:
    """A pipeline name from the notebook's file name (lower-case, '-', at most 63)."""
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:63].strip("-")
    return slug or "notebook"


def compile_notebook(path: Path, out: Path | None = None, *, name: str | None = None,
                     packages: list[str] | None = None, image: str | None = None) -> Compiled:
    """Compile `path` into a pipeline file (default NOTEBOOK_pipeline.py beside it)."""
    from lab.nbcompile import codegen, tags

    if path.suffix != ".ipynb":
        raise InputError(str(path), None, "not a notebook (.ipynb)",
                         hint="give the notebook file, e.g. train.ipynb")
    nb, file = tags.read(path)
    plan = tags.plan(nb, file)
    settings = _settings(nb, file)
    target = out or path.with_name(f"{path.stem}_pipeline.py")
    if target.suffix != ".py":
        raise InputError(str(target), None, "the pipeline file must end in .py",
                         hint=f"e.g. -o {path.stem}_pipeline.py")
    pipeline_name = name or settings.get("pipeline_name") or default_name(path.stem)
    if not isinstance(pipeline_name, str) or not _NAME.match(pipeline_name):
        raise InputError(file, "metadata.kflab.pipeline_name" if not name else "--name",
                         f"{pipeline_name!r} is not a valid pipeline name",
                         hint="lower-case letters, digits and '-', at most 63")
    pkgs = packages if packages is not None else _packages(
        settings.get("packages", []), "metadata.kflab.packages", file)
    if packages is not None:
        _packages(packages, "--package", file)
    base = image or settings.get("base_image") or DEFAULT_IMAGE
    if not isinstance(base, str) or not _IMAGE.match(base) or len(base) > 300:
        raise InputError(file, "metadata.kflab.base_image" if not image else "--image",
                         f"{base!r} is not an image reference",
                         hint=f"e.g. {DEFAULT_IMAGE}")
    text = codegen.render(plan, name=pipeline_name, target=target.name, image=base,
                          packages=pkgs)
    ast.parse(text)  # what was written must be Python (a bug here, never the user's)
    try:
        target.write_text(text)
    except OSError as exc:
        raise InputError(str(target), None, f"cannot write: {exc.strerror}",
                         hint="choose a folder you can write to") from None
    steps = [s.name for s in plan.ordered()] + (["pipeline-metrics"] if plan.metrics else [])
    return Compiled(target, pipeline_name, steps, dict(plan.parameters), list(plan.metrics),
                    plan.warnings)
