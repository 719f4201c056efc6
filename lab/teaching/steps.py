"""The labs' pipeline steps as a cluster runs them: each step's image and what it
pip-installs when its pod starts.

A KFP lightweight component's container runs `sh -c "... pip install <packages_to_install>
&& pip install kfp==<the compiling SDK> --no-deps ... && "$0" "$@"` (kfp
dsl/component_factory.py `_get_packages_to_install_command`), so a class with no network
needs those packages in an index the pods reach (lab/teaching/pipindex.py). This module
compiles every lab that requires pipelines, as its solution leaves it (assets, then
solutions over them; notebooks compiled by `kflab notebook compile`), and reads each step's
image and requirements from the compiled IR. `scripts/release_data.py` ships the result;
a test recompiles and compares, so a lab that adds a package makes the data stale.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lab.errors import LabError

KFP_PACKAGE = "kfp"
# Compiles every @dsl.pipeline of one file to IR JSON (the file's folder first on sys.path).
_COMPILE_ALL = r"""
import importlib.util, json, sys, pathlib
from kfp import compiler
from kfp.dsl.graph_component import GraphComponent
path, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
sys.path.insert(0, str(path.parent))
spec = importlib.util.spec_from_file_location("kflab_lab_pipeline", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for name, fn in sorted(vars(mod).items()):
    if isinstance(fn, GraphComponent):
        compiler.Compiler().compile(fn, str(out / f"{path.stem}.{name}.json"))
"""


def executors(ir: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(executor label, image, requirements) of every container executor in an IR."""
    from lab.backends.local.pipelines.taskproc import parse

    out = []
    execs = ((ir.get("deploymentSpec") or {}).get("executors") or {})
    for label, spec in sorted(execs.items()):
        container = (spec or {}).get("container") or {}
        program = parse(list(container.get("command") or []))
        reqs = program.requirements if program is not None else []
        out.append((label, str(container.get("image", "")), reqs))
    return out


def _lab_folder(scenario: Any, into: Path) -> Path:
    for part in (scenario.assets, scenario.root / "solutions"):
        if part.is_dir():
            shutil.copytree(part, into, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return into


def compute() -> dict[str, Any]:
    """{"labs": {lab: [{"step", "image", "requirements"}]}, "images", "requirements"}."""
    from lab.nbcompile import compile_notebook
    from lab.scenarios.loader import load_all

    labs: dict[str, list[dict[str, Any]]] = {}
    for scenario in load_all():
        if "pipelines" not in scenario.requires:
            continue
        with tempfile.TemporaryDirectory(prefix="kflab-steps-") as tmp:
            work = _lab_folder(scenario, Path(tmp) / "work")
            out = Path(tmp) / "ir"
            out.mkdir()
            for nb in sorted(work.glob("*.ipynb")):
                compile_notebook(nb)
            for py in sorted(work.glob("*.py")):
                if "@dsl.pipeline" not in py.read_text(errors="replace"):
                    continue
                proc = subprocess.run([sys.executable, "-c", _COMPILE_ALL, str(py), str(out)],
                                      capture_output=True, text=True, timeout=300,
                                      cwd=work, check=False)
                if proc.returncode != 0:
                    raise LabError(f"{scenario.id}/{py.name} does not compile: "
                                   f"{proc.stderr.strip()[-500:]}")
            found: dict[tuple[str, str, tuple[str, ...]], None] = {}
            for ir_file in sorted(out.glob("*.json")):
                for _, image, reqs in executors(json.loads(ir_file.read_text())):
                    found[(ir_file.stem, image, tuple(reqs))] = None
            labs[scenario.id] = [
                {"pipeline": stem, "image": image,
                 "requirements": [r for r in reqs if not _is_kfp(r)]}
                for stem, image, reqs in found]
    images = sorted({s["image"] for steps in labs.values() for s in steps})
    reqs = sorted({r for steps in labs.values() for s in steps for r in s["requirements"]})
    return {"labs": labs, "images": images, "requirements": reqs}


def _is_kfp(requirement: str) -> bool:
    """kfp's own line (the SDK that compiles: kfp==<server version> on a cluster)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).name.lower() == KFP_PACKAGE
    except InvalidRequirement:
        return False


def shipped() -> dict[str, Any]:
    """The labs' steps as kflab ships them (manifests/release-data.json)."""
    from lab.components.release import load

    data = load().get("pipeline_steps")
    if not isinstance(data, dict):
        raise LabError("kflab's release data has no pipeline steps",
                       hint="maintainers: python3 scripts/release_data.py --upstream TREE")
    return data
