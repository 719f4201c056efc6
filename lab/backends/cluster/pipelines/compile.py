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

With a package index (an offline class's, a proxy, a company mirror), every step installs
from it: each lightweight component is compiled with kfp's own options `pip_index_urls` and
`pip_trusted_hosts` (kfp dsl/component_decorator.py `component` passes them to
component_factory.py `create_component_from_func`, and `make_index_url_options` writes
`--index-url URL --trusted-host HOST` into the step's pip commands); a step that kflab did not
compile (a component loaded from YAML, a pipeline compiled elsewhere) has the same options
written into its pip commands, in the same form. When the index's contents are known (the
class index's ConfigMap, or the index answering), a step that needs a package the index does
not have is refused before the run, naming the step and the package.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
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
# With an index (argv[4], JSON: url, trusted_hosts), every component made by kfp's decorator
# gets it as its pip_index_urls / pip_trusted_hosts (overriding its own: an offline class
# reaches no other index).
_COMPILE = r"""
import importlib.util, json, sys
from kfp import compiler
from kfp.dsl import component_factory
from kfp.dsl.graph_component import GraphComponent
path, function, out = sys.argv[1], sys.argv[2] or None, sys.argv[3]
index = json.loads(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
if index:
    _create = component_factory.create_component_from_func
    def _with_index(*args, **kwargs):
        kwargs["pip_index_urls"] = [index["url"]]
        kwargs["pip_trusted_hosts"] = list(index["trusted_hosts"])
        return _create(*args, **kwargs)
    component_factory.create_component_from_func = _with_index
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
                       version: str = KFP_SERVER_VERSION,
                       index: Any = None) -> dict[str, Any]:
    """The pipeline's IR (PipelineSpec as a dict), compiled by kfp == `version`; with
    `index` (pipindex.ClassIndex) every step installs from it (see the module's docstring).
    `out` holds the IR (and any platform spec after it) as written."""
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
        docs = _load_all(path)
    else:
        python = sdk_python(version)
        argv = [python, "-c", _COMPILE, str(path), function or "", str(out)]
        if index is not None:
            argv.append(json.dumps({"url": index.url, "trusted_hosts": index.trusted_hosts}))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              cwd=path.parent, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise InputError(str(path), None, "compiling the pipeline failed: "
                             + " | ".join(tail), hint="run `python FILE` to see the full error")
        docs = _load_all(out)
        check_ir(docs[0], version, str(path))
    ir = docs[0]
    if index is not None:
        point_at_index(ir, index)
        check_index(ir, index, str(path))
    _write_all(out, docs)
    return ir


def _load(out: Path) -> dict[str, Any]:
    docs = _load_all(out)
    return docs[0] if docs else {}


def _load_all(out: Path) -> list[dict[str, Any]]:
    """The IR and, after it, any platform spec (kfp-kubernetes) a compiled file holds."""
    import yaml

    text = out.read_text()
    try:
        return [json.loads(text)]
    except ValueError:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        return docs or [{}]


def _write_all(out: Path, docs: list[dict[str, Any]]) -> None:
    """JSON for one document (and any .json name), else YAML documents as kfp writes them."""
    import yaml

    if out.suffix.lower() in (".yaml", ".yml"):
        out.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    elif len(docs) == 1:
        out.write_text(json.dumps(docs[0]))
    else:
        out.write_text(yaml.safe_dump_all(docs, sort_keys=False))


# kfp's pip command (component_factory.py make_pip_install_command) and the options
# make_index_url_options may already have put after it.
_PIP = re.compile(r"(python3 -m pip install --quiet --no-warn-script-location )"
                  r"((?:--(?:index-url|extra-index-url|trusted-host) \S+ )*)")


def index_options(index: Any) -> str:
    """The options kfp's make_index_url_options writes for one URL and explicit hosts."""
    return " ".join([f"--index-url {index.url}",
                     *[f"--trusted-host {h}" for h in index.trusted_hosts]]) + " "


def point_at_index(ir: dict[str, Any], index: Any) -> list[str]:
    """Every step's pip commands install from `index`: the executors (their labels) whose
    commands had to be rewritten (a component kflab's compile did not make)."""
    want = index_options(index)
    changed = []
    for label, spec in ((ir.get("deploymentSpec") or {}).get("executors") or {}).items():
        container = (spec or {}).get("container") or {}
        command = container.get("command")
        if not isinstance(command, list):
            continue
        new = [_PIP.sub(lambda m: m.group(1) + want, c) if isinstance(c, str) else c
               for c in command]
        if new != command:
            container["command"] = new
            changed.append(label)
    return changed


_PIP_ARGS = re.compile(r"-m pip install (.*?)(?:&&|$)", re.S)


def pip_requirements(command: Any) -> list[str]:
    """The requirements a step's pip commands install, as kfp quotes them (repr of each
    package: component_factory.py make_pip_install_command); options left out."""
    out: list[str] = []
    for part in command if isinstance(command, list) else []:
        if not isinstance(part, str):
            continue
        for args in _PIP_ARGS.findall(part):
            out += [t for t in re.findall(r"'([^']*)'", args) if not t.startswith("-")]
    return out


def step_requirements(ir: dict[str, Any]) -> dict[str, list[str]]:
    """executor label -> the project names its pip commands install (markers that do not
    hold on the steps' Python dropped: pip skips those lines too)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from lab.backends.cluster.pipelines.index import Target

    out: dict[str, list[str]] = {}
    for label, spec in sorted(((ir.get("deploymentSpec") or {}).get("executors")
                               or {}).items()):
        command = ((spec or {}).get("container") or {}).get("command")
        names = []
        for text in pip_requirements(command):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate(Target().env()):
                names.append(req.name)
        out[label] = names
    return out


def check_index(ir: dict[str, Any], index: Any, where: str) -> None:
    """Refuse a step whose packages the index does not have (when its contents are known)."""
    from lab.backends.cluster.pipelines.index import missing

    if index.packages is None:
        return
    for label, spec in sorted(((ir.get("deploymentSpec") or {}).get("executors")
                               or {}).items()):
        reqs = pip_requirements(((spec or {}).get("container") or {}).get("command"))
        gone = missing(reqs, index.packages)
        if gone:
            step = label.removeprefix("exec-")
            raise LabError(f"{where}: step {step!r} installs {gone[0]}, from the package "
                           f"index {index.url}",
                           hint="add it to the index (kflab bundle create --index-package "
                                "NAME), or remove it from the step's packages_to_install")


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
