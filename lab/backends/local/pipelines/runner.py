"""KFP v2 pipelines on the local backend, run by Kubeflow's own `kfp.local` runner.

A run is recorded as a `PipelineRun` whose status mirrors the KFP v2 API's Run (`state`,
`created_at`, `finished_at`, `error`, `run_details.task_details[]`), with each task's output
parameters, metrics and artifact paths added, so checks read the same shape on a cluster.

Each task's process is started by kflab (not by kfp.local's own Popen): in a process group
of its own, tagged and recorded in the run's lease, so an interrupted run -- Ctrl-C,
SIGTERM, SIGHUP, `kflab delete` -- or a kflab killed outright never leaves a task running.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lab import signals, state
from lab.backends.local import procs
from lab.backends.local.owners import Lease
from lab.errors import InputError, LabError
from lab.kube.conditions import now
from lab.state import StateError
from lab.yamlio import is_file, user_path

Event = dict[str, Any]
EventSink = Callable[[Event], None]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TASK_START = re.compile(r"Executing task '([^']+)'")
TASK_END = re.compile(r"Task '([^']+)' finished with status (\w+)")
STATE = {"SUCCESS": "SUCCEEDED", "FAILURE": "FAILED"}


def task_lines(lines: Iterator[str], task: str) -> Iterator[str]:
    """The lines of one task in a run log: from kfp.local's "Executing task 'T'" to its
    "Task 'T' finished" line, both included."""
    inside = False
    for line in lines:
        plain = ANSI.sub("", line)
        if (m := TASK_START.search(plain)) and m.group(1) == task:
            inside = True
        if inside:
            yield line
            if (m := TASK_END.search(plain)) and m.group(1) == task:
                inside = False


def _forget_modules_under(folder: Path) -> None:
    """Drop cached imports of modules living in `folder`, so edits to them are seen."""
    root = str(folder.resolve())
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if file and str(Path(file).resolve()).startswith(root + os.sep):
            del sys.modules[name]


def _load_module(path: Path) -> Any:
    """Import a pipeline file under a private module name, its folder importable."""
    mod_name = f"kflab_pipeline_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise InputError(str(path), None, "not a Python file", hint="give a .py pipeline file")
    module = importlib.util.module_from_spec(spec)
    _forget_modules_under(path.parent)  # a sibling module edited since the last run
    sys.path.insert(0, str(path.parent))
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
    except Exception as exc:
        raise InputError(str(path), None, f"importing the pipeline failed: {exc!r}",
                         hint="run `python FILE` to see the full error") from exc
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent))
    return module


def load_pipeline(path: Path, function: str | None = None) -> Any:
    """The `@dsl.pipeline` function of a .py file (by name when the file has several)."""
    from kfp.dsl.graph_component import GraphComponent

    if not path.is_file():
        raise InputError(str(path), "spec.pipeline", "pipeline file not found",
                         hint="give a path relative to the manifest or the current folder")
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


def _task_names(pipeline: Any) -> list[str]:
    """Top-level task names in dependency order, as KFP names them in the run."""
    tasks = pipeline.pipeline_spec.root.dag.tasks
    order: list[str] = []
    pending = dict(tasks)
    while pending:
        ready = [n for n, t in pending.items() if set(t.dependent_tasks) <= set(order)]
        if not ready:  # a cycle cannot happen in KFP, but never loop forever
            ready = list(pending)
        for name in sorted(ready):
            order.append(name)
            pending.pop(name)
    return order


def _artifact_types(pipeline: Any) -> dict[str, dict[str, str]]:
    """task name -> {output artifact name: schema title (system.Model, system.Metrics...)}."""
    spec = pipeline.pipeline_spec
    out: dict[str, dict[str, str]] = {}
    for name, task in spec.root.dag.tasks.items():
        comp = spec.components[task.component_ref.name]
        out[name] = {a: d.artifact_type.schema_title
                     for a, d in comp.output_definitions.artifacts.items()}
    return out


def _read_task_outputs(task_dir: Path, types: dict[str, str]) -> dict[str, Any] | None:
    """Parameters, metrics and artifacts from a task's executor_output.json."""
    try:
        data = json.loads((task_dir / "executor_output.json").read_text())
    except (OSError, ValueError):
        return None
    outputs: dict[str, Any] = {"parameters": data.get("parameterValues", {}), "metrics": {},
                               "artifacts": {}}
    for out_name, group in (data.get("artifacts") or {}).items():
        for art in group.get("artifacts", []):
            uri = art.get("uri", "")
            meta = art.get("metadata") or {}
            path = Path(uri)
            kind = types.get(out_name, "system.Artifact")
            outputs["artifacts"][out_name] = {"type": kind, "uri": uri, "path": str(path),
                                              "exists": path.exists(), "metadata": meta}
            if kind == "system.Metrics":  # metric values live in the artifact's metadata
                outputs["metrics"].update(meta)
    return outputs


class _LogWatcher(threading.Thread):
    """Follows the run log and turns kfp.local's task lines into progress events."""

    def __init__(self, log: Path, sink: EventSink | None) -> None:
        super().__init__(daemon=True)
        self.log, self.sink = log, sink
        self.started: dict[str, str] = {}
        self.finished: dict[str, tuple[str, str]] = {}
        self.stop_flag = threading.Event()

    def _handle(self, line: str) -> None:
        line = ANSI.sub("", line)
        if m := TASK_START.search(line):
            self.started[m.group(1)] = now()
            if self.sink:
                self.sink({"event": "task-started", "task": m.group(1)})
        elif m := TASK_END.search(line):
            state = STATE.get(m.group(2), m.group(2))
            self.finished[m.group(1)] = (state, now())
            if self.sink:
                self.sink({"event": "task-finished", "task": m.group(1), "state": state})

    def run(self) -> None:
        with open(self.log, errors="replace") as fh:
            while True:
                line = fh.readline()
                if line:
                    self._handle(line)
                elif self.stop_flag.is_set():
                    return
                else:
                    time.sleep(0.05)


@contextlib.contextmanager
def _redirected(log: Path, env: dict[str, str]) -> Iterator[None]:
    """Send this process's stdout/stderr (and kfp's task output) to the log; set env."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    with open(log, "a", buffering=1) as fh, contextlib.redirect_stdout(fh), \
            contextlib.redirect_stderr(fh):
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@contextlib.contextmanager
def _tasks_owned_by(lease: Lease) -> Iterator[None]:
    """Run kfp.local's task subprocesses the way kflab runs every child (pinned kfp==2.17.3:
    `subprocess_task_handler.run_local_subprocess` starts each task)."""
    from kfp.local import subprocess_task_handler as tasks

    def run_task(full_command: list[str], env_vars: dict[str, str] | None = None) -> int:
        env = {**os.environ, **(env_vars or {})}
        proc = procs.popen(full_command, env=env, stdout=subprocess.PIPE, tag=lease.token)
        label = f"task-{proc.pid}"
        try:
            lease.add(label, proc, full_command)
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                print(raw.decode(errors="replace"), end="")
            print("\n")
            return proc.wait()
        finally:
            if proc.poll() is None:
                procs.stop_all([procs.ProcRecord.of(label, proc)], grace=2.0)
            proc.wait()
            with contextlib.suppress(StateError):
                lease.drop(label)

    original = tasks.run_local_subprocess
    tasks.run_local_subprocess = run_task
    try:
        yield
    finally:
        tasks.run_local_subprocess = original


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
    path = user_path(base_dir, pipeline, file=None, field="spec.pipeline")
    if not is_file(path):
        raise InputError(str(path), "spec.pipeline", "pipeline file not found",
                         hint="give a path relative to the manifest or the current folder")
    return path


def run(obj: dict[str, Any], run_dir: Path, base_dir: Path, save: Callable[[dict], None],
        sink: EventSink | None = None, *, lease: Lease) -> dict[str, Any]:
    """Run the PipelineRun `obj` with kfp.local, saving its status as it goes."""
    import kfp.local

    spec = obj.get("spec") or {}
    path = check_spec(obj, base_dir)
    pipeline = load_pipeline(path, spec.get("function"))
    arguments = spec.get("arguments") or {}
    tasks = _task_names(pipeline)
    root, log, tmp = (state.path(run_dir, p) for p in ("pipeline_root", "run.log", "tmp"))
    for folder in (root, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    status: dict[str, Any] = {
        "run_id": str(uuid.uuid4()), "display_name": obj["metadata"]["name"],
        "pipeline_name": pipeline.name, "state": "RUNNING", "created_at": now(),
        "finished_at": None, "error": None, "pipeline_root": str(root), "log": str(log),
        "run_details": {"task_details": [
            {"display_name": t, "state": "PENDING", "outputs": None} for t in tasks]},
    }
    obj["status"] = status
    save(obj)
    if sink:
        sink({"event": "run-started", "run": obj["metadata"]["name"], "tasks": tasks})
    watcher = _LogWatcher(log, sink)
    watcher.start()
    interrupted = False
    env = {"TMPDIR": str(tmp), "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PYTHONWARNINGS": "ignore::FutureWarning",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        with _redirected(log, env), _tasks_owned_by(lease):
            kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False),
                           pipeline_root=str(root), raise_on_error=True)
            pipeline(**arguments)
        status["state"] = "SUCCEEDED"
    except KeyboardInterrupt as exc:
        interrupted = True
        status["state"] = "CANCELED"
        status["error"] = {"message": f"the run was canceled because "
                                      f"{signals.reason(exc, lease.stop_request())}"}
        raise
    except Exception as exc:  # the pipeline's own failure: record it, never lose it
        status["state"] = "FAILED"
        status["error"] = {"message": ANSI.sub("", str(exc)) or type(exc).__name__}
    finally:
        watcher.stop_flag.set()
        watcher.join(timeout=5)
        status["finished_at"] = now()
        _fill_tasks(status, root, watcher, _artifact_types(pipeline))
        try:
            save(obj)
        except StateError:
            if not interrupted:
                raise  # nothing else is on its way up: report the full or read-only folder
        if sink:
            sink({"event": "run-finished", "run": obj["metadata"]["name"],
                  "state": status["state"]})
    return obj


def _fill_tasks(status: dict[str, Any], root: Path, watcher: _LogWatcher,
                types: dict[str, dict[str, str]]) -> None:
    run_folders = sorted(p for p in root.iterdir() if p.is_dir())
    run_folder = run_folders[-1] if run_folders else None
    details = status["run_details"]["task_details"]
    known = {d["display_name"] for d in details}
    if run_folder:
        for extra in sorted(p.name for p in run_folder.iterdir() if p.is_dir()):
            if extra not in known:
                details.append({"display_name": extra, "state": "PENDING", "outputs": None})
    for task in details:
        name = task["display_name"]
        outputs = (_read_task_outputs(run_folder / name, types.get(name, {}))
                   if run_folder else None)
        if name in watcher.finished:
            task["state"], task["end_time"] = watcher.finished[name]
            if status["state"] == "CANCELED" and task["state"] == "FAILED":
                task["state"] = "CANCELED"  # killed by the cancellation, not failed itself
        elif outputs is not None:
            task["state"] = "SUCCEEDED"
        elif status["state"] in ("FAILED", "CANCELED"):
            task["state"] = "SKIPPED" if name not in watcher.started else status["state"]
        if name in watcher.started:
            task["start_time"] = watcher.started[name]
        task["outputs"] = outputs
