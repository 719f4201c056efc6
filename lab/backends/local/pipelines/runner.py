"""KFP v2 pipelines on the local backend: compiled, then run task by task (engine.py) as a
cluster runs them -- independent tasks side by side, KFP's cache, control flow -- each task
through kfp's executor entry point with the inputs kfp.local's helpers build.

A pipeline is a .py file with a @dsl.pipeline (compiled here with the installed kfp) or the
YAML/JSON a KFP user compiles and uploads (`kfp.compiler.Compiler().compile(...)`).

A run is recorded as a `PipelineRun` whose status mirrors the KFP v2 API's Run (`state`,
`created_at`, `finished_at`, `error`, `run_details.task_details[]`), with each task's output
parameters, metrics and artifact paths added, so checks read the same shape on a cluster.

Each task's process is started by kflab: in a process group of its own, tagged and recorded
in the run's lease, so an interrupted run -- Ctrl-C, SIGTERM, SIGHUP, `kflab delete` -- or a
kflab killed outright never leaves a task running. Task output goes to one log file per task
and, each line prefixed `[task] `, to the run's log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import signals, state
from lab.backends.local.owners import Lease
from lab.backends.pipeline_memo import (  # noqa: F401 - parse_arguments: the CLI's
    artifacts_root,
    default_parallelism,
    parse_arguments,
    stamp,
)
from lab.content import PACKAGE as KFLAB_PACKAGE
from lab.errors import InputError, LabError
from lab.kube.conditions import now
from lab.state import StateError
from lab.yamlio import is_file, user_path

Event = dict[str, Any]
EventSink = Callable[[Event], None]

YAML_SUFFIXES = (".yaml", ".yml", ".json")


def _forget_modules_under(folder: Path) -> None:
    """Drop cached imports of the learner's modules living in `folder`, so edits to them are
    seen. Never kflab's own modules, `__main__`, or installed packages, which can sit under
    that folder too (a pipeline at the root of a kflab clone, a project's own .venv):
    re-importing those would make second copies of kflab's and kfp's classes."""
    root = os.path.realpath(folder) + os.sep
    keep = [os.path.realpath(p) + os.sep for p in
            {str(KFLAB_PACKAGE), sys.prefix, sys.base_prefix}]
    real: dict[str, bool] = {}  # a module's folder -> forget it: one lookup per folder
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if name == "__main__" or not isinstance(file, str):
            continue
        where = os.path.dirname(file)
        if where not in real:
            path = os.path.realpath(where) + os.sep
            real[where] = path.startswith(root) and not any(map(path.startswith, keep)) \
                and "site-packages" not in path and "dist-packages" not in path
        if real[where]:
            del sys.modules[name]


def _import_error(path: Path, exc: ImportError) -> InputError:
    """What a pipeline file's failed import needs, said so a user can act: kfp-kubernetes
    (`from kfp import kubernetes`: PVCs, secrets, pod settings only a cluster applies) or
    another package this installation lacks."""
    missing = exc.name or ""
    if missing in ("kfp.kubernetes", "kfp_kubernetes") or "'kubernetes' from 'kfp'" in str(exc):
        return InputError(_shown(str(path)), None, "the pipeline imports kfp.kubernetes (the "
                          "kfp-kubernetes package): its settings (PVCs, secrets, pod "
                          "fields) need a cluster, and kfp-kubernetes is not installed here",
                          hint="run it on the cluster backend (`kflab pipeline run --backend "
                               "cluster`); to compile it here, pip install kfp-kubernetes")
    if missing and not missing.startswith("kfp"):
        top = missing.split(".")[0]
        return InputError(_shown(str(path)), None, "importing the pipeline failed: no "
                          f"module named '{missing}' in kflab's environment",
                          hint=f"pip install the package that provides '{top}' into kflab's "
                               "environment, or run the pipeline where it is installed")
    return import_problem(exc, path)


class _ExitCalled(BaseException):
    """os._exit() called while a pipeline file was imported (a BaseException, so that the
    file's own `except Exception` cannot swallow it)."""


def _trapped_exit(code: int = 0) -> None:
    raise _ExitCalled(code)


def _where(exc: BaseException, folder: Path) -> tuple[str | None, int | None]:
    """The learner's file and line an import error comes from: a SyntaxError's own, else
    the innermost frame in a file under the pipeline's folder."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    root = os.path.realpath(folder) + os.sep
    found: tuple[str | None, int | None] = (None, None)
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if os.path.realpath(file).startswith(root):
            found = (file, tb.tb_lineno)
        tb = tb.tb_next
    return found


def import_problem(exc: BaseException, path: Path) -> InputError:
    """An import of a pipeline file that raised, said as file, line and the error's own
    words (a SyntaxError with the offending line), never as a Python repr."""
    file, line = _where(exc, path.parent)
    if isinstance(exc, SyntaxError):
        text = (exc.text or "").strip()[:120]
        problem = f"{type(exc).__name__}: {exc.msg}"
        hint = (f"correct line {line} (`{text}`), then run again" if text and line
                else "correct the file, then run again")
    else:
        words = str(exc).splitlines()[0][:300] if str(exc) else ""
        problem = f"importing the pipeline failed: {type(exc).__name__}" + \
            (f": {words}" if words else "")
        hint = f"run `python {path.name}` to see the full error"
    return InputError(_shown(file or str(path)), None, problem, line=line, hint=hint)


def _shown(file: str) -> str:
    """A file as the learner typed it: relative to the current folder when inside it."""
    try:
        return os.path.relpath(file) if Path(file).resolve().is_relative_to(Path.cwd()) \
            else file
    except (OSError, ValueError):
        return file


def _load_module(path: Path) -> Any:
    """Import a pipeline file under a private module name, its folder importable, compiled
    from its source (replay.SourceOnly: never a stale __pycache__ entry)."""
    from lab.backends.local.pipelines.replay import SourceOnly

    mod_name = f"kflab_pipeline_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, path,
                                                  loader=SourceOnly(mod_name, str(path)))
    if spec is None or spec.loader is None:
        raise InputError(str(path), None, "not a Python file", hint="give a .py pipeline file")
    module = importlib.util.module_from_spec(spec)
    _forget_modules_under(path.parent)  # a sibling module edited since the last run
    sys.path.insert(0, str(path.parent))
    real_exit = os._exit
    os._exit = _trapped_exit  # type: ignore[assignment]  # the file must not end kflab
    try:
        with warnings.catch_warnings():
            # kfp warns about a future default base image on every component: noise here.
            warnings.filterwarnings("ignore", category=FutureWarning, module="kfp")
            warnings.filterwarnings("ignore", message=".*base_image.*")
            spec.loader.exec_module(module)
    except SystemExit as exc:  # sys.exit() at the top level: kflab must not exit with it
        raise InputError(str(path), None, f"importing the pipeline called sys.exit({exc.code!r})"
                         ": the file runs when kflab loads it, so nothing was run",
                         hint='move that code under `if __name__ == "__main__":`') from None
    except ImportError as exc:
        raise _import_error(path, exc) from exc


    except _ExitCalled as exc:
        file, line = _where(exc, path.parent)
        raise InputError(_shown(file or str(path)), None,
                         f"importing the pipeline called os._exit({exc.args[0]!r}): the file "
                         "runs when kflab loads it, so nothing was run", line=line,
                         hint='move that code under `if __name__ == "__main__":`') from None
    except Exception as exc:
        raise import_problem(exc, path) from exc
    finally:
        os._exit = real_exit
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent))
    return module


def load_pipeline(path: Path, function: str | None = None) -> Any:
    """The `@dsl.pipeline` function of a .py file (by name when the file has several)."""
    from kfp.dsl.graph_component import GraphComponent

    if not path.is_file():
        raise InputError(str(path), "spec.pipeline", "pipeline file not found",
                         hint="give a path relative to the manifest or the current folder")
    from lab import yamlio

    yamlio.read_bytes(path, hint="give the pipeline's .py file")  # capped before it is run
    module = _load_module(path)
    found = {n: v for n, v in vars(module).items() if isinstance(v, GraphComponent)}
    if function:
        if function not in found:
            raise InputError(str(path), "spec.function", f"no pipeline named '{function}'",
                             hint=f"pipelines in the file: {', '.join(found) or 'none'}")
        return found[function]
    if len(found) != 1:
        raise InputError(
            str(path), "spec.function",
            "no @dsl.pipeline function found" if not found
            else f"several pipelines found: {', '.join(found)}",
            hint="decorate one function with @dsl.pipeline, or pick one with --function",
        )
    return next(iter(found.values()))


def check_spec(obj: dict[str, Any], base_dir: Path) -> Path:
    """The pipeline file of a PipelineRun, after checking the spec's fields' types."""
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise InputError(None, "spec", "expected a mapping", hint="spec: {pipeline: FILE}")
    pipeline = spec.get("pipeline")
    if not pipeline or not isinstance(pipeline, str):
        raise InputError(None, "spec.pipeline", "a PipelineRun needs a pipeline file",
                         hint="set spec.pipeline: path/to/pipeline.py")
    if not isinstance(spec.get("arguments") or {}, dict):
        raise InputError(None, "spec.arguments", "expected a mapping of argument values",
                         hint="arguments: {epochs: 2}")
    if spec.get("function") is not None and not isinstance(spec["function"], str):
        raise InputError(None, "spec.function", "expected the name of a @dsl.pipeline")
    par = spec.get("parallelism")
    if par is not None and (not isinstance(par, int) or isinstance(par, bool) or par < 1):
        raise InputError(None, "spec.parallelism", "expected a whole number of at least 1",
                         hint="parallelism: 4 (default: the machine's cores)")
    if not isinstance(spec.get("cache", True), bool):
        raise InputError(None, "spec.cache", "expected true or false",
                         hint="cache: false runs every task again")
    path = user_path(base_dir, pipeline, file=None, field="spec.pipeline")
    if not is_file(path):
        raise InputError(str(path), "spec.pipeline", "pipeline file not found",
                         hint="give a path relative to the manifest or the current folder")
    return path




def task_lines(lines: Iterator[str], task: str) -> Iterator[str]:
    """The lines of one task in a run log (each line there is prefixed `[task] `)."""
    prefix = f"[{task}] "
    for line in lines:
        if line.startswith(prefix):
            yield line[len(prefix):]


def load_spec(path: Path, function: str | None = None) -> tuple[Any, Any]:
    """(PipelineSpec, platform spec or None) of a .py pipeline or a compiled YAML/JSON."""
    if path.suffix.lower() in YAML_SUFFIXES:
        from kfp import components

        from lab import yamlio

        # kflab's bounded loader first: kfp's yaml.safe_load would expand an alias bomb into
        # the protobuf (billions of values), and recurses on deep nesting
        yamlio.load_documents(yamlio.read_text(path, hint="give the compiled pipeline's path"),
                              str(path), duplicates="keep")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                comp = components.load_component_from_file(str(path))
        except Exception as exc:
            raise InputError(str(path), None, f"not a compiled KFP pipeline: {exc}",
                             hint="give the file kfp.compiler.Compiler().compile() wrote"
                             ) from None
        spec = comp.pipeline_spec
        if function:
            raise InputError(str(path), "spec.function",
                             "a compiled pipeline holds one pipeline: --function is for .py")
        if not spec.root.HasField("dag"):
            raise InputError(str(path), None, "a compiled component, not a pipeline",
                             hint="compile the @dsl.pipeline function")
        return spec, getattr(comp, "platform_spec", None)
    pipeline = load_pipeline(path, function)
    return pipeline.pipeline_spec, getattr(pipeline, "platform_spec", None)


def check_arguments(spec: Any, arguments: dict[str, Any], where: str) -> None:
    """Unknown and missing pipeline arguments, said before the run (as the KFP API does)."""
    params = spec.root.input_definitions.parameters
    arts = spec.root.input_definitions.artifacts
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise InputError(where, "spec.arguments", f"unknown argument(s): {', '.join(unknown)}",
                         hint="the pipeline's parameters: " + (", ".join(params) or "none"))
    missing = sorted(n for n, d in params.items() if n not in arguments and not
                     d.is_optional and not d.HasField("default_value"))
    missing += sorted(n for n, d in arts.items() if not d.is_optional)
    if missing:
        raise InputError(where, "spec.arguments", f"missing argument(s): {', '.join(missing)}",
                         hint="pass them with -p NAME=VALUE")


_prepared: dict[int, tuple[dict[str, Any], Any]] = {}  # id -> (the object, its plan)


@dataclass
class Replay:
    """An unchanged pipeline whose earlier run was all cacheable (replay.py)."""

    memo: dict[str, Any]
    memo_path: Path


def _remember(obj: dict[str, Any], prepared: Any) -> Any:
    while len(_prepared) >= 8:  # checked but never run: forget the oldest
        _prepared.pop(next(iter(_prepared)))
    _prepared[id(obj)] = (obj, prepared)
    return prepared


def _memo_path(obj: dict[str, Any], path: Path, store_root: Path | None) -> Path | None:
    from lab.backends.pipeline_memo import memo_for

    return None if store_root is None else memo_for(store_root, obj, path)


def prepare(obj: dict[str, Any], base_dir: Path, store_root: Path | None = None,
            *, compile_: bool = False) -> Any:
    """Load and check the pipeline before anything is replaced or run: the compiled IR, the
    arguments, and what every task would run (plan.py refuses what cannot run here).
    An unchanged pipeline whose last run was all cacheable is not compiled: a Replay
    (replay.py) stands for it, unless `compile_`."""
    from lab.backends.local.pipelines import replay, taskproc
    from lab.backends.local.pipelines.plan import Refused
    from lab.backends.local.pipelines.plan import plan as check_plan

    known = _prepared.get(id(obj))
    if known is not None and known[0] is obj and not (compile_ and isinstance(known[1], Replay)):
        return known[1]  # `kflab apply` checks, then applies
    spec = obj.get("spec") or {}
    path = check_spec(obj, base_dir)
    memo_path = _memo_path(obj, path, store_root)
    if memo_path is not None and not compile_:
        memo = replay.load(memo_path)
        if memo is not None:
            return _remember(obj, Replay(memo, memo_path))
    taskproc.import_kfp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path.suffix.lower() in YAML_SUFFIXES:
            ir, platform = load_spec(path, spec.get("function"))
            inputs = {"files": {str(path): replay.sha(str(path))}, "dirs": {}, "env": {}}
        else:
            with replay.Inputs() as read:
                ir, platform = load_spec(path, spec.get("function"))
            found = read.digests(path)
            inputs = {} if found is None else {**found, "env": read.env}  # {}: no memo
    check_arguments(ir, spec.get("arguments") or {}, str(path))
    try:
        the_plan = check_plan(ir, platform)
    except Refused as exc:
        raise InputError(str(path), None, str(exc.args[0]), hint=exc.hint) from None
    the_plan.inputs = inputs
    return _remember(obj, the_plan)


def run(obj: dict[str, Any], run_dir: Path, base_dir: Path, save: Callable[[dict], None],
        sink: EventSink | None = None, *, lease: Lease, store_root: Path) -> dict[str, Any]:
    """Run the PipelineRun `obj`, saving its status as it goes."""
    from lab.backends.local.pipelines import engine
    from lab.backends.local.pipelines.cache import Cache

    plan = prepare(obj, base_dir, store_root)
    spec = obj.get("spec") or {}
    meta = obj["metadata"]
    namespace = meta.get("namespace", "default")
    if isinstance(plan, Replay):
        _prepared.pop(id(obj), None)
        done = _replay(obj, plan, run_dir, save, sink, store_root)
        if done is not None:
            return done
        replay_forget(plan.memo_path)  # an entry it names is gone: compile and run
        plan = prepare(obj, base_dir, store_root, compile_=True)
    _prepared.pop(id(obj), None)
    ir = plan.spec
    arguments = spec.get("arguments") or {}
    log, tmp, logs = (state.path(run_dir, p) for p in ("run.log", "tmp", "logs"))
    root = artifacts_root(store_root, namespace)
    for folder in (root, tmp, logs):
        folder.mkdir(parents=True, exist_ok=True)
    run_id = str(uuid.uuid4())
    pipeline_name = ir.pipeline_info.name
    cache = Cache(store_root, namespace, pipeline_name) if spec.get("cache", True) else None
    parallelism = int(spec.get("parallelism") or default_parallelism())
    status: dict[str, Any] = {
        "run_id": run_id, "display_name": meta["name"], "pipeline_name": pipeline_name,
        "state": "RUNNING", "created_at": now(), "finished_at": None, "error": None,
        # the run's own times to the millisecond, as its tasks have them (created_at and
        # finished_at are the API's, to the second): `kflab ui` shows the run's duration
        "start_time": stamp(),
        "pipeline_root": str(root / run_id), "log": str(log),
        "parallelism": parallelism, "cache": cache is not None,
        "run_details": {"task_details": []},
        "dag": root_dag(ir),  # for `kflab ui`'s graph
        "graph": static_graph(ir),  # every DAG, nested: the graph draws tasks not yet started
    }
    obj["status"] = status
    save(obj)
    if sink:
        sink({"event": "run-started", "run": meta["name"],
              "tasks": list(ir.root.dag.tasks)})
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONWARNINGS": "ignore::FutureWarning",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    interrupted = False
    with open(log, "w", buffering=1) as run_log:
        the_run = engine.Run(plan, run_id=run_id, pipeline_root=root, logs=logs,
                             run_log=run_log, tmp=tmp, parallelism=parallelism,
                             cache=cache, lease=lease, env=env,
                             on_change=lambda: _save_progress(obj, the_run, save),
                             sink=sink)
        the_run.display_name, the_run.created = meta["name"], status["created_at"]
        try:
            ok, _ = the_run.execute(arguments)
            status["state"] = "SUCCEEDED" if ok else "FAILED"
            if not ok:
                status["error"] = {"message": _failure(the_run, pipeline_name)}
        except KeyboardInterrupt as exc:
            interrupted = True
            status["state"] = "CANCELED"
            status["error"] = {"message": f"the run was canceled because "
                                          f"{signals.reason(exc, lease.stop_request())}"}
            raise
        finally:
            status["finished_at"] = now()
            status["end_time"] = stamp()
            status["run_details"]["task_details"] = _details(the_run)
            _memorize(obj, plan, the_run, base_dir, store_root)
            try:
                save(obj)
            except StateError:
                if not interrupted:
                    raise  # nothing else is on its way up: report the full or read-only folder
            if sink:
                sink({"event": "run-finished", "run": meta["name"], "state": status["state"]})
    return obj


def replay_forget(memo_path: Path) -> None:
    from lab.backends.local.pipelines import replay

    replay.forget(memo_path)


def _memorize(obj: dict[str, Any], plan: Any, the_run: Any, base_dir: Path,
              store_root: Path) -> None:
    """After a run that succeeded with every task cacheable, the memo an unchanged re-run
    is answered from (replay.py); otherwise no memo (a stale one is removed)."""
    from lab.backends.local.pipelines import replay

    status = obj["status"]
    try:
        memo_path = _memo_path(obj, check_spec(obj, base_dir), store_root)
    except LabError:
        return
    if memo_path is None:
        return
    if status["state"] != "SUCCEEDED" or not the_run.replayable or not plan.inputs:
        replay.forget(memo_path)
        return
    tasks = []
    with the_run.lock:
        for node in the_run.details:
            entry = the_run.memo.get(id(node))
            extra = {k: v for k, v in node.items() if k not in (
                "display_name", "state", "outputs", "start_time", "end_time", "cached",
                "cached_from")}
            tasks.append({"display_name": node["display_name"], "state": node["state"],
                          "extra": extra, "timed": "start_time" in node, **(entry or {})})
    roots: dict[str, set[str]] = {}
    for task in tasks:
        if task.get("key"):
            roots.setdefault(task["key"], set()).add(task["task_root"])
    if any(len(found) > 1 for found in roots.values()):
        # two tasks with one key ran side by side: the entry names one of them, so a re-run
        # would hand the other's consumers different outputs; the next (engine) run, whose
        # tasks all hit that one entry, leaves the memo
        replay.forget(memo_path)
        return
    replay.save(memo_path, files=plan.inputs["files"], dirs=plan.inputs["dirs"],
                env=plan.inputs["env"],
                pipeline_name=status["pipeline_name"], dag=status["dag"], tasks=tasks,
                graph=status.get("graph"))


def _replay(obj: dict[str, Any], rep: Replay, run_dir: Path, save: Callable[[dict], None],
            sink: EventSink | None, store_root: Path) -> dict[str, Any] | None:
    """The record of an unchanged, all-cached run, written as the engine would write it;
    None when a cache entry the memo names is gone (nothing is written then). The start-up
    fast path (lab/fastpath.py) writes it through the same pipeline_memo functions."""
    from lab.backends import pipeline_memo
    from lab.backends.local.pipelines.cache import Cache

    spec = obj.get("spec") or {}
    meta = obj["metadata"]
    memo = rep.memo
    cache = Cache(store_root, meta.get("namespace", "default"),
                  str(memo.get("pipeline_name") or ""))
    created = now()
    details = pipeline_memo.details(memo, cache.get, pipeline_memo.stamp(), cache.origin)
    if details is None:
        return None

    def started(tasks: list[str]) -> None:
        if sink:
            sink({"event": "run-started", "run": meta["name"], "tasks": tasks})
            for node in details:  # each one reused from the cache, as the engine tells it
                if node.get("cached"):
                    sink({"event": "task-finished", "task": node["display_name"],
                          "state": node["state"], **pipeline_memo.cached_event(node)})

    pipeline_memo.write_replay(obj, memo, details, store_root=store_root, run_dir=run_dir,
                               parallelism=int(spec.get("parallelism")
                                               or default_parallelism()),
                               created=created, save=save, started=started)
    if sink:
        sink({"event": "run-finished", "run": meta["name"], "state": "SUCCEEDED"})
    return obj


def root_dag(ir: Any) -> dict[str, list[str]]:
    """{task: [the tasks it waits for]} of the pipeline's root DAG: the edges `kflab ui`
    draws (hook kept apart from the engine: it only reads the IR)."""
    return {name: list(task.dependent_tasks) for name, task in ir.root.dag.tasks.items()}


def static_graph(ir: Any) -> dict[str, Any] | None:
    """The pipeline's DAGs, nested (lab/backends/pipeline_graph.py), for `kflab ui`."""
    from google.protobuf import json_format

    from lab.backends.pipeline_graph import graph

    try:
        return graph(json_format.MessageToDict(ir))
    except Exception:  # the graph is for the page only: a run never fails for it
        return None


def _details(the_run: Any) -> list[dict[str, Any]]:
    with the_run.lock:
        return [dict(d) for d in the_run.details]


def _save_progress(obj: dict[str, Any], the_run: Any, save: Callable[[dict], None]) -> None:
    obj["status"]["run_details"]["task_details"] = _details(the_run)
    save(obj)


def _failure(the_run: Any, pipeline_name: str) -> str:
    """kfp.local's wording for a failed run, naming the failed tasks."""
    leaves = [d["display_name"] for d in _details(the_run) if d["state"] == "FAILED"]
    msg = (f"Pipeline '{pipeline_name}' finished with status FAILURE. Inner task failed: "
           + ", ".join(f"'{n}'" for n in leaves) + ".") if leaves else \
        f"Pipeline '{pipeline_name}' finished with status FAILURE."
    if the_run.errors:
        msg += " " + "; ".join(the_run.errors)
    return msg
