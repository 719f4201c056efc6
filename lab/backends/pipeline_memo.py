"""What answers an unchanged, all-cached pipeline run, with the standard library only.

The local backend's replay (lab/backends/local/pipelines/replay.py, its docstring says why a
replay reports what the engine would) and kflab's start-up fast path (lab/fastpath.py, which
answers `kflab pipeline run` before the CLI and the backend are imported) read the same memo,
check the same conditions, read the same cache entries and write the same record through
this one module; nothing here imports kfp, click, rich or PyYAML, nor the local backend's
package (its owners, processes and store pull in psutil).

- the memo: `memo_file` (its key: the pipeline file, function, arguments, the interpreter,
  kfp's and kflab's versions), `load` (its files, the import-relevant names in its folders and
  its environment variables unchanged);
- the cache (cache.py's entries): `cached` (an entry still naming a whole execution),
  `referenced_runs`, `read_task_outputs`;
- the replayed run: `details` (task_details from the memo and the cache) and `write_replay`
  (the run's folders and record, as runner.run leaves them).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import state
from lab.errors import LabError
from lab.kube.conditions import now

MEMO_VERSION = 2  # 2: the pipeline file always listed, folders' import names, interpreter
SKIPPED = "SKIPPED"  # a task reused from the cache, as the KFP API reports it
TASK_LOG = "main.log"  # an execution's log, kept in its task folder (cache.py says why)


def stamp() -> str:
    """RFC 3339 UTC with milliseconds: a timeline of tasks a second long needs them."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def sha(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def parse_arguments(pairs: list[str]) -> dict[str, Any]:
    """`key=value` pairs from the command line; values are parsed as JSON when they can be."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise LabError(f"bad pipeline argument '{pair}'", hint="write it as name=value")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
        except RecursionError:
            raise LabError(f"pipeline argument '{key}': nested too deeply",
                           hint="pass a simpler value") from None
    return out


# --- the memo ---------------------------------------------------------------------------------

def versions() -> str:
    """What else a compile depends on: the interpreter (its path and version: another
    Python may have other packages and compile other bytecode), $PYTHONPATH (folders it
    imports from; the memo lists what each holds), kflab's version and
    its pipeline code (an editable install changes without a new version), and kfp's
    version and pipeline spec -- read without importing kfp (and without importlib.metadata,
    which scans every installed distribution: 0.1 s)."""
    import importlib.util

    from lab import __version__

    out = [f"kflab={__version__}", f"python={sys.executable}:{sys.version}",
           f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"]
    code = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "local",
                                                   "pipelines")]
    for folder in code:
        with contextlib.suppress(OSError), os.scandir(folder) as found:
            out += sorted(f"{e.name}:{e.stat().st_size}:{e.stat().st_mtime_ns}"
                          for e in found if e.name.endswith(".py"))
    found = importlib.util.find_spec("kfp")
    for folder in (found.submodule_search_locations or []) if found else []:
        for part in ("version.py", os.path.join("pipeline_spec", "pipeline_spec_pb2.py")):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(folder, part))
                out.append(f"{part}:{st.st_size}:{st.st_mtime_ns}")
    return ",".join(out)


_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the `lab` package


def installed(path: str) -> bool:
    """A path inside the Python installation, an installed package (site-packages,
    dist-packages) or kflab's own package (an editable install's too): its files change
    only with a version or kflab's pipeline code, which the memo's key holds."""
    real = os.path.realpath(path)
    if "site-packages" in real or "dist-packages" in real:
        return True
    return any((real + os.sep).startswith(os.path.realpath(p) + os.sep)
               for p in {sys.prefix, sys.base_prefix, _OWN})


def listing(folder: str) -> str | None:
    """The names in `folder` that an import could find, as one sha256: a module of any
    suffix Python imports, a sub-folder holding one (a package, or a namespace package's
    portion). A module added beside the pipeline can shadow another or satisfy an import
    that failed. None when the folder cannot be read. Other files and folders (data, notes,
    the state folder, what tasks write) do not count."""
    import importlib.machinery

    suffixes = tuple(importlib.machinery.all_suffixes())

    def module(name: str) -> bool:
        return name.endswith(suffixes) and name.split(".")[0].isidentifier()

    names = []
    try:
        with os.scandir(folder) as found:
            for e in found:
                if not e.is_dir():
                    if module(e.name):
                        names.append(e.name)
                elif e.name.isidentifier() and e.name != "__pycache__":
                    with contextlib.suppress(OSError), os.scandir(e.path) as inner:
                        if any(module(i.name) for i in inner):
                            names.append(e.name + "/")
    except OSError:
        return None
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()


def memo_file(store_root: Path, namespace: str, pipeline: Path, function: str | None,
              arguments: dict[str, Any]) -> Path:
    key = json.dumps({"v": MEMO_VERSION, "file": str(pipeline), "function": function,
                      "arguments": arguments, "versions": versions()},
                     sort_keys=True, default=str)
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    return state.path(store_root, "pipeline-replay", namespace, f"{name}.json")


def memo_for(store_root: Path, obj: dict[str, Any], pipeline: Path) -> Path | None:
    """The memo file of a PipelineRun `obj` whose pipeline file is `pipeline`; None when
    the run turns the cache off (`spec.cache: false`) or its spec cannot key one."""
    spec = obj.get("spec") or {}
    if not spec.get("cache", True):
        return None
    try:
        return memo_file(store_root, obj["metadata"].get("namespace", "default"), pipeline,
                         spec.get("function"), spec.get("arguments") or {})
    except (LabError, TypeError, ValueError):
        return None


def unchanged(memo: dict[str, Any]) -> bool:
    """The files, folders and environment variables the pipeline's compile read are as they
    were. A memo that lists no file (not even the pipeline) is never trusted."""
    for name, value in (memo.get("env") or {}).items():
        if os.environ.get(name) != value:
            return False
    files, dirs = memo.get("files") or {}, memo.get("dirs") or {}
    if not files or not isinstance(files, dict) or not isinstance(dirs, dict):
        return False
    return all(listing(folder) == digest for folder, digest in dirs.items()) and \
        all(sha(path) == digest if digest else not os.path.lexists(path)
            for path, digest in files.items())


def load(memo_path: Path) -> dict[str, Any] | None:
    """The memo, when it is this version's and what its compile read is unchanged."""
    with contextlib.suppress(Exception):
        memo = json.loads(memo_path.read_text())
        if isinstance(memo, dict) and memo.get("v") == MEMO_VERSION and unchanged(memo):
            return memo
    return None


# --- the cache's entries (cache.py writes them) ----------------------------------------------

def cache_folder(store_root: Path, namespace: str, pipeline_name: str) -> Path:
    """`<state>/pipeline-cache/<namespace>/<pipeline name hash>`: KFP's cache scope."""
    scope = hashlib.sha256(f"pipeline/{pipeline_name}".encode()).hexdigest()[:16]
    return state.path(store_root, "pipeline-cache", namespace, scope)


def entry(path: Path) -> dict[str, Any] | None:
    """A cache entry as Cache.put writes it, or None (unreadable, not JSON, other types)."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("task_root"), str)
            and isinstance(data.get("run_id", ""), str) and isinstance(data.get("files"), list)
            and all(isinstance(f, str) for f in data["files"])):
        return None
    return data


def _whole(task_root: Path, files: list[Path]) -> bool:
    """The executor input and output are there and every artifact file it wrote."""
    try:
        for name in ("executor_input.json", "executor_output.json"):
            if not isinstance(json.loads((task_root / name).read_text()), dict):
                return False
    except (OSError, ValueError, RecursionError):
        return False
    return all(f.is_absolute() and f.exists() for f in files)


def cached(store_root: Path, entry_file: Path) -> Path | None:
    """The task folder a cache entry names, when the entry is readable and the execution it
    names is whole and inside the state folder; None otherwise (Cache.get removes it)."""
    found = entry(entry_file)
    if found is None:
        return None
    folder = Path(found["task_root"])
    if not (folder.is_absolute() and folder.resolve().is_relative_to(store_root.resolve())
            and _whole(folder, [Path(f) for f in found["files"]])):
        return None
    return folder


def origin(store_root: Path, entry_file: Path) -> dict[str, str] | None:
    """Where the execution a cache entry names ran: {"run": its run's name (absent for an
    entry written before runs were named), "run_id", "task": its path in that run}, as a
    cache hit's `cached_from` records it (MLMD's `cached_execution_id` on a cluster); None
    when the entry is unreadable or its folder is not a run's task folder."""
    found = entry(entry_file)
    if found is None or not found.get("run_id"):
        return None
    run_id = found["run_id"]
    folder = Path(found["task_root"])
    for base in folder.parents:
        if base.name == run_id:
            out = {"run_id": run_id, "task": folder.relative_to(base).as_posix()}
            if isinstance(found.get("run"), str) and found["run"]:
                out["run"] = found["run"]
            return out
    return None


def referenced_runs(root: Path) -> set[str]:
    """Run ids that some cache entry still needs (their task folders are kept)."""
    base = state.path(root, "pipeline-cache")
    found: set[str] = set()
    for path in base.glob("*/*/*.json"):
        data = entry(path)
        if data and data.get("run_id"):
            found.add(data["run_id"])
    return found


def read_task_outputs(task_root: Path, types: dict[str, str]) -> dict[str, Any] | None:
    """Parameters, metrics and artifacts from a task's executor_output.json, in the
    PipelineRun shape (lab/backends/shapes.py)."""
    from lab.backends import shapes

    try:
        data = json.loads((task_root / "executor_output.json").read_text())
    except (OSError, ValueError):
        return None
    metrics: dict[str, Any] = {}
    artifacts: dict[str, Any] = {}
    for out_name, group in (data.get("artifacts") or {}).items():
        for art in group.get("artifacts", []):
            uri, meta = art.get("uri", ""), art.get("metadata") or {}
            kind = types.get(out_name, "system.Artifact")
            artifacts[out_name] = shapes.artifact_entry(kind, uri, Path(uri), meta)
            if kind == "system.Metrics":  # metric values live in the artifact's metadata
                metrics.update(meta)
    return shapes.task_outputs(data.get("parameterValues", {}), metrics, artifacts)


# --- the replayed run ------------------------------------------------------------------------

def details(memo: dict[str, Any], lookup: Callable[[str], Path | None],
            when: str, source: Callable[[str], dict[str, str] | None] | None = None
            ) -> list[dict[str, Any]] | None:
    """The run's task_details, or None when some cache entry is gone or names another
    execution (the run then goes through the engine). `lookup(key)`: the task folder the
    cache entry `key` names, or None; `source(key)`: the execution it names (`origin`)."""
    out: list[dict[str, Any]] = []
    for task in memo.get("tasks") or []:
        node = {"display_name": task["display_name"], "state": task["state"],
                "outputs": None, **(task.get("extra") or {})}
        if task.get("key"):
            hit = lookup(task["key"])
            if hit is None or str(hit) != task.get("task_root"):
                return None
            node.update(state=SKIPPED, cached=True,
                        outputs=read_task_outputs(hit, task.get("types") or {}))
            came = source(task["key"]) if source is not None else None
            if came:
                node["cached_from"] = came
        if task.get("timed"):
            node.update(start_time=when, end_time=when)
        out.append(node)
    return out


def cached_event(node: dict[str, Any]) -> dict[str, Any]:
    """What a `task-finished` event adds for a task reused from the cache: `cached`, and
    `from`, the name of the run whose execution it reused (when known)."""
    if not node.get("cached"):
        return {}
    came = node.get("cached_from")
    run = came.get("run") if isinstance(came, dict) else None
    return {"cached": True, **({"from": run} if isinstance(run, str) and run else {})}


def cached_text(ev: dict[str, Any]) -> str:
    """The words after `SKIPPED` on a cached task's progress line (term.progress and the
    start-up fast path print the same)."""
    return f"(cached, from run {ev['from']})" if ev.get("from") else "(cached)"


def artifacts_root(store_root: Path, namespace: str) -> Path:
    """The local pipeline root of a namespace (KFP's object-store bucket, here a folder):
    `<state>/pipeline-root/<namespace>/<run id>/<task>/<output>`."""
    return state.path(store_root, "pipeline-root", namespace)


def drop_run_artifacts(store_root: Path, namespace: str, run_id: str) -> None:
    """A deleted run's task folders go, unless a cache entry still names them (KFP keeps
    what its cache reuses when a run is deleted)."""
    if not run_id or run_id in referenced_runs(store_root):
        return
    try:
        folder = state.path(artifacts_root(store_root, namespace), run_id)
    except LabError:
        return  # an edited record: never follow it
    if folder.exists():
        state.remove(store_root, folder)


def write_replay(obj: dict[str, Any], memo: dict[str, Any], task_details: list[dict[str, Any]],
                 *, store_root: Path, run_dir: Path, parallelism: int, created: str,
                 save: Callable[[dict[str, Any]], Any],
                 started: Callable[[list[str]], None] | None = None) -> dict[str, Any]:
    """The record of an unchanged, all-cached run, written as the engine would write it:
    the run's folders, an empty log, a run id with its (empty) pipeline-root folder, the
    status; `started(tasks)` is told before the record is saved, as the engine's sink is."""
    meta = obj["metadata"]
    namespace = meta.get("namespace", "default")
    log, tmp, logs = (state.path(run_dir, p) for p in ("run.log", "tmp", "logs"))
    root = artifacts_root(store_root, namespace)
    for folder in (root, tmp, logs):
        folder.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    run_id = str(uuid.uuid4())
    (root / run_id).mkdir(parents=True, exist_ok=True)
    dag = memo.get("dag") or {}
    began = stamp()
    obj["status"] = {
        "run_id": run_id, "display_name": meta["name"],
        "pipeline_name": str(memo.get("pipeline_name") or ""),
        "state": "SUCCEEDED", "created_at": created, "finished_at": now(), "error": None,
        "start_time": began, "end_time": stamp(),  # to the millisecond, as the engine's
        "pipeline_root": str(root / run_id), "log": str(log), "parallelism": parallelism,
        "cache": True, "run_details": {"task_details": task_details}, "dag": dag,
        "graph": memo.get("graph") if isinstance(memo.get("graph"), dict) else None,
    }
    if started is not None:
        started(list(dag))
    save(obj)
    return obj


def default_parallelism() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)
