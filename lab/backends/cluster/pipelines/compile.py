"""Compile a pipeline file for the lab's KFP server with the SDK of the server's own version.

KFP's SDK and backend are released together, and KFP's compatibility notes say a feature can
reach one before the other: an IR compiled by a newer SDK can use fields an older server
ignores or rejects. So the cluster backend compiles with
kfp == the server's version (KFP_SERVER_VERSION, the `pipelines` component of
manifests/versions.yaml), not with the local extra's kfp: in this process when the installed
SDK is that version, otherwise in a separate environment in kflab's cache folder
($XDG_CACHE_HOME or ~/.cache, then kflab/kfp-sdk-<version>/) created once with pip
(online from the package index; offline with $KFLAB_WHEELHOUSE as a --find-links folder).
The compiled IR is checked: `sdkVersion` must name that version and `schemaVersion` must be
one the server reads.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from lab.errors import InputError, LabError

KFP_SERVER_VERSION = "2.16.0"
SCHEMA_VERSIONS = ("2.1.0",)  # the IR schema the 2.x servers read
WHEELHOUSE_ENV = "KFLAB_WHEELHOUSE"

# Runs inside the compiler environment: load the file, find the pipeline, compile to JSON.
_COMPILE = r"""
import importlib.util, json, sys
from kfp import compiler
from kfp.dsl.graph_component import GraphComponent
path, function, out = sys.argv[1], sys.argv[2] or None, sys.argv[3]
sys.path.insert(0, str(__import__('pathlib').Path(path).parent))
spec = importlib.util.spec_from_file_location("kflab_pipeline", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
found = {n: v for n, v in vars(mod).items() if isinstance(v, GraphComponent)}
if function:
    if function not in found:
        sys.exit(f"no pipeline named {function!r}; found: {', '.join(found) or 'none'}")
    fn = found[function]
elif len(found) != 1:
    sys.exit("no @dsl.pipeline function found" if not found else
             f"several pipelines found: {', '.join(found)}; pick one with --function")
else:
    fn = next(iter(found.values()))
compiler.Compiler().compile(fn, out)
"""


def cache_dir() -> Path:
    """kflab's cache folder (shared by every state folder: a compiler is not lab state)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kflab"


def sdk_python(version: str = KFP_SERVER_VERSION) -> str:
    """A Python with kfp == `version`: this one when it has it, else the pinned environment
    (created on first use)."""
    try:
        from importlib.metadata import version as installed

        if installed("kfp") == version:
            return sys.executable
    except Exception:  # noqa: S110 - not installed here: use the pinned environment
        pass
    env_dir = cache_dir() / f"kfp-sdk-{version}"
    python = env_dir / "bin" / "python"
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(env_dir.parent / f".kfp-sdk-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two kflab processes build it once
        if python.exists() and (env_dir / ".kflab-ok").exists():
            return str(python)
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
        argv = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                f"kfp=={version}"]
        wheels = os.environ.get(WHEELHOUSE_ENV)
        if wheels:
            argv[4:4] = ["--no-index", "--find-links", wheels]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise LabError(f"cannot install kfp=={version} to compile for the lab's KFP "
                           f"server: {proc.stderr.strip()[-400:]}",
                           hint=f"needs the package index, or ${WHEELHOUSE_ENV} pointing at "
                                "a folder of wheels (docs/cluster.md)")
        (env_dir / ".kflab-ok").write_text(version)
    return str(python)


def compile_for_server(path: Path, function: str | None, out: Path,
                       version: str = KFP_SERVER_VERSION) -> dict[str, Any]:
    """The pipeline's IR (PipelineSpec as a dict), compiled by kfp == `version`."""
    if not path.is_file():
        raise InputError(str(path), "spec.pipeline", "pipeline file not found",
                         hint="give a path relative to the manifest or the current folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):  # compiled already: uploaded as is
        ir = _load(path)
        if not isinstance(ir, dict) or "root" not in ir or "pipelineInfo" not in ir:
            raise InputError(str(path), None, "not a compiled KFP pipeline",
                             hint="give the file kfp.compiler.Compiler().compile() wrote")
        if str(ir.get("schemaVersion", "")) not in SCHEMA_VERSIONS:
            raise InputError(str(path), "schemaVersion", f"IR schema "
                             f"{ir.get('schemaVersion')!r} is not one KFP {version} reads")
        out.write_text(json.dumps(ir))
        return ir
    python = sdk_python(version)
    proc = subprocess.run([python, "-c", _COMPILE, str(path), function or "", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=path.parent,
                          check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise InputError(str(path), None, "compiling the pipeline failed: " + " | ".join(tail),
                         hint="run `python FILE` to see the full error")
    ir = _load(out)
    check_ir(ir, version, str(path))
    return ir


def _load(out: Path) -> dict[str, Any]:
    import yaml

    text = out.read_text()
    try:
        return json.loads(text)
    except ValueError:
        docs = list(yaml.safe_load_all(text))  # a compiled file may add a platform spec
        return docs[0] if docs else {}


def check_ir(ir: dict[str, Any], version: str, where: str) -> None:
    """The IR must come from the server's SDK version and use a schema it reads."""
    sdk = str(ir.get("sdkVersion", ""))
    schema = str(ir.get("schemaVersion", ""))
    if sdk != f"kfp-{version}":
        raise LabError(f"{where}: compiled by {sdk or 'an unknown SDK'}, not kfp-{version}",
                       hint="the lab's KFP server runs pipelines compiled by its own SDK")
    if schema not in SCHEMA_VERSIONS:
        raise LabError(f"{where}: IR schemaVersion {schema!r} is not one KFP "
                       f"{version} reads ({', '.join(SCHEMA_VERSIONS)})")
