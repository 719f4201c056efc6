"""One Katib trial, from assignments to a running process.

Builds the Trial object as Katib's experiment controller would (the trial template with
`${trialParameters.*}` and `${trialSpec.*}` substituted, owner and experiment labels), and
starts the primary container's command + args as an argv list -- never through a shell, so
parameter values reach the program literally, whatever characters they hold.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lab import state
from lab.backends.local.containers.engine import Engine
from lab.backends.local.gpu_devices import given
from lab.backends.local.procs import ChildGroup
from lab.backends.local.runners import ProcessRun
from lab.backends.local.tuning import tfevent
from lab.backends.local.tuning.metrics import MetricLog, Tail
from lab.backends.local.tuning.spec import Spec
from lab.backends.local.tuning.template import PLACEHOLDER, meta_source
from lab.errors import LabError
from lab.kube.conditions import now

EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"


def _meta_value(ref: str, name: str, namespace: str, trial_spec: dict[str, Any]) -> str:
    """Katib's trial metadata references: ${trialSpec.Name}, .Labels[key], ..."""
    key = ref[len("${trialSpec."):-1]
    simple = {"Name": name, "Namespace": namespace, "Kind": trial_spec.get("kind", ""),
              "APIVersion": trial_spec.get("apiVersion", "")}
    if key in simple:
        return str(simple[key])
    group, _, label = key.partition("[")
    return str(meta_source(trial_spec, group)[label.rstrip("]")])  # checked at apply


def run_spec(spec: Spec, name: str, assignments: list[dict[str, str]]) -> dict[str, Any]:
    """The trial template with every placeholder replaced by this trial's values."""
    values = {a["name"]: a["value"] for a in assignments}
    resolved = {tp: values[ref] if ref in values else
                _meta_value(ref, name, spec.namespace, spec.trial_spec)
                for tp, ref in spec.trial_parameters.items()}

    def sub(node: Any) -> Any:
        if isinstance(node, str):
            return PLACEHOLDER.sub(lambda m: resolved[m.group(1)], node)
        if isinstance(node, dict):
            return {k: sub(v) for k, v in node.items()}
        if isinstance(node, list):
            return [sub(v) for v in node]
        return node

    out = sub(copy.deepcopy(spec.trial_spec))
    meta = out.setdefault("metadata", {})
    meta["name"], meta["namespace"] = name, spec.namespace
    return out


def trial_object(exp: dict[str, Any], spec: Spec, name: str,
                 assignments: list[dict[str, str]], runspec: dict[str, Any],
                 rules: list[dict[str, Any]]) -> dict[str, Any]:
    exp_name = exp["metadata"]["name"]
    tspec: dict[str, Any] = {
        "objective": exp["spec"]["objective"],
        "parameterAssignments": assignments,
        "runSpec": runspec,
        "metricsCollector": exp["spec"]["metricsCollectorSpec"],
        "primaryContainerName": spec.primary,
        "labels": {EXPERIMENT_LABEL: exp_name},
    }
    if rules:
        tspec["earlyStoppingRules"] = rules
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
        "metadata": {"name": name, "namespace": spec.namespace, "creationTimestamp": now(),
                     "labels": {EXPERIMENT_LABEL: exp_name},
                     "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1",
                                          "kind": "Experiment", "name": exp_name,
                                          "controller": True}]},
        "spec": tspec,
    }


def trial_env(container: dict[str, Any], name: str,
              gpus: list[str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # `python3` in a trial means this lab's Python (it has the ML stack), as in an image.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    for item in container.get("env") or []:
        if "value" in item:
            env[str(item["name"])] = str(item["value"])
    env["KATIB_TRIAL_NAME"] = name
    if gpus is not None:  # the host has GPUs: the trial sees those it was given, as a pod
        env.update(given(gpus))
    return env


@dataclass
class Launched:
    proc: Any  # subprocess.Popen, or None when the trial could not start
    metrics_source: Path  # what the metrics collector reads
    tail: Tail  # reads it, from where it stood when the trial started
    problem: str | None = None


MOUNTNS = Path(__file__).with_name("mountns.py")


@dataclass
class Running:
    """A trial the experiment's controller runs: its process, output, metrics so far."""

    trial: dict[str, Any]
    proc: Any
    tail: Tail
    metrics: MetricLog
    number: int  # Optuna trial number
    started: float
    early_stopped: bool = False
    fmt: str = "TEXT"
    grid_id: int | None = None  # the grid point, for grid experiments
    events: tfevent.Collected | None = None  # TensorFlowEvent: what the collector read


def launch(group: ChildGroup, spec: Spec, runspec: dict[str, Any], name: str, log: Path,
           base_dir: Path, record: Path, gpus: list[str] | None = None,
           private: Path | None = None, engine: Engine | None = None,
           root: Path | None = None) -> Launched:
    """Start the primary container of `runspec`; its stdout and stderr go to `log`.
    `record` lists the metrics files outside the manifest's folder that trials wrote.
    With `private` (a folder of this trial's own), the File collector's folder is that
    folder, mounted at the collector's path for this trial only (mountns.py), as
    Katib's pod mounts its own volume there. With `engine`, the trial is a container of
    its image (tuning/containers.py; `root`: the state folder, for its labels)."""
    if engine is not None:
        from lab.backends.local.tuning import containers

        log.write_bytes(b"")
        assert root is not None
        proc, source, problem = containers.launch(
            group, engine, spec, runspec, name, log, base_dir,
            private or log.parent / "metrics", root, gpus)
        if problem is not None:
            with open(log, "ab") as fh:
                fh.write(f"kflab: {problem}\n".encode())
        return Launched(proc, source, Tail(source), problem)
    container: Any = runspec
    for key in spec.container_path:
        container = container[key]
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    env = trial_env(container, name, gpus)
    workdir = container.get("workingDir")
    cwd = Path(workdir) if workdir and Path(workdir).is_dir() else base_dir
    coll = spec.collector
    source = log if coll.kind == "StdOut" else cwd / str(coll.path)
    problem = None
    mount: list[str] = []
    if coll.kind == "File" and private is not None:
        private.mkdir(parents=True, exist_ok=True)
        try:  # the mount point, again: removed since the experiment started (a clean-up)?
            source.parent.mkdir(parents=True, exist_ok=True)  # a pod's volume has no such gap
        except OSError as exc:
            problem = f"cannot create the mount point {source.parent}: {exc.strerror or exc}"
        mount = [sys.executable, "-I", "-S", str(MOUNTNS), "run", str(private),
                 str(source.parent), "--"]
        source = private / source.name
    elif coll.kind == "File":
        problem = prepare_metrics_file(source, base_dir, record)
    elif coll.kind == "TensorFlowEvent":
        problem = prepare_metrics_dir(source, record)
    tail = Tail(source)  # the file is new: read from its start
    exe = shutil.which(argv[0], path=env["PATH"]) if os.sep not in argv[0] else argv[0]
    if exe is None and problem is None:
        problem = f"command not found: {argv[0]}"
    if mount and problem is None and not (cwd / str(exe)).exists():
        problem = f"command not found: {exe}"  # said here, not by the mount helper
    with open(log, "wb") as fh:
        proc = None
        if problem is None:
            proc, problem = _start(group, name, [*mount, str(exe), *argv[1:]], cwd, env, fh)
        if problem is not None:
            fh.write(f"kflab: {problem}\n".encode())
    return Launched(proc, source, tail, problem)


def launch_job(backend: Any, lease: Any, spec: Spec, runspec: dict[str, Any], name: str,
               log: Path, base_dir: Path, record: Path,
               held: dict[str, list[str]] | None = None,
               engine: Engine | None = None) -> Launched:
    """Start a trial whose runSpec is a PyTorchJob or TFJob: all its replicas, as the
    Training Operator runs them (jobtrial.py); the Master's output is the trial's log.
    With `engine` the replicas are containers, and the collector's folder is the trial's
    own, mounted in the primary replica (tuning/containers.py)."""
    from lab.backends.local.tuning.jobtrial import JobTrial

    container: Any = runspec
    for key in spec.container_path:
        container = container[key]
    workdir = container.get("workingDir")
    cwd = base_dir / workdir if workdir else base_dir
    coll = spec.collector
    source = log if coll.kind == "StdOut" else cwd / str(coll.path)
    log.write_bytes(b"")
    problem = None
    mounts: list[Any] = []
    if engine is not None:
        from lab.backends.local.containers import spec as cspec
        from lab.backends.local.tuning import containers

        try:
            mounts, found = containers.collector_mount(
                engine, spec, cspec.read(container, "spec.trialTemplate.trialSpec"),
                log.parent / "metrics")
            source = found if found is not None else log
        except LabError as exc:
            problem = str(exc).splitlines()[0]
    elif coll.kind == "File":
        problem = prepare_metrics_file(source, base_dir, record)
    elif coll.kind == "TensorFlowEvent":
        problem = prepare_metrics_dir(source, record)
    tail = Tail(source)
    proc = None
    if problem is None:
        try:
            proc = JobTrial(backend, runspec, name, log.parent, base_dir, lease, log,
                            held=held, engine=engine, primary_mounts=tuple(mounts))
            proc.begin()
        except LabError as exc:
            problem, proc = f"the trial's {runspec.get('kind')}: {exc}", None
    if problem is not None:
        with open(log, "ab") as fh:
            fh.write(f"kflab: {problem}\n".encode())
    return Launched(proc, source, tail, problem)


PATH_FIX = ("or point metricsCollectorSpec.source.fileSystemPath.path (and the path the "
            "trial writes) into the manifest's folder")


def prepare_metrics_file(source: Path, base_dir: Path, record: Path) -> str | None:
    """Give the trial a fresh metrics file, as Katib does: each trial pod mounts its own
    empty folder at the collector's path (pkg/webhook/v1beta1/pod/inject_webhook.go), so a
    trial never sees the file of the one before it.

    Inside the manifest's folder the old file is removed and a missing folder created.
    Elsewhere a missing folder is created (the mount), and a file is removed only if a
    trial wrote it (listed in `record`): a file kflab did not write may be anyone's, so the
    trial fails naming it instead. Returns the problem, or None."""
    inside = source.resolve().is_relative_to(base_dir.resolve()) and not source.is_symlink()
    try:
        if inside:
            source.unlink(missing_ok=True)
            source.parent.mkdir(parents=True, exist_ok=True)
            return None
        written = _written(record)
        if not source.parent.is_dir():
            source.parent.mkdir(parents=True, exist_ok=True)
        elif source.exists() or source.is_symlink():
            if str(source) not in written:
                return (f"the metrics file {source} exists and no trial wrote it: a Katib "
                        "trial starts without it (each pod mounts its own folder there), "
                        f"and kflab deletes only files its trials wrote; move it away, "
                        f"{PATH_FIX}")
            source.unlink()
        if str(source) not in written:
            state.write_json(record, sorted(written | {str(source)}))
    except state.StateError as exc:
        return f"cannot record the metrics file {source}: {exc}"
    except OSError as exc:
        return (f"cannot prepare the metrics file {source} (Katib mounts its folder in each "
                f"trial pod): {exc.strerror}; create {source.parent} yourself, {PATH_FIX}")
    return None


def prepare_metrics_dir(source: Path, record: Path) -> str | None:
    """Give the trial an empty TensorFlowEvent folder, as Katib does: the webhook mounts an
    empty volume at the collector's directory in each trial pod
    (pkg/webhook/v1beta1/pod/inject_webhook.go getMountPath and mutateMetricsCollectorVolume,
    kind Directory), so a trial never reads the event files of the one before it.

    A missing folder is created. Files that earlier trials left there (listed in `record`
    when they ended, record_dir_files) are removed, with the folders they emptied; any other
    file may be anyone's, so the trial fails naming it and nothing is removed. Returns the
    problem, or None."""
    try:
        if source.is_symlink() or (source.exists() and not source.is_dir()):
            return (f"the TensorFlowEvent collector's path {source} is not a folder: Katib "
                    "mounts an empty folder there in each trial pod; move it away, or point "
                    "metricsCollectorSpec.source.fileSystemPath.path elsewhere")
        if source.is_dir():
            written = _written(record)
            files, folders = _tree(source)
            foreign = [f for f in files if f not in written]
            if foreign:
                return (f"the TensorFlowEvent folder {source} holds files no trial wrote "
                        f"({', '.join(foreign[:3])}): a Katib trial starts with it empty "
                        "(each pod mounts its own folder there), and kflab removes only "
                        "files its trials left; move them away, or point "
                        "metricsCollectorSpec.source.fileSystemPath.path elsewhere")
            for f in files:
                os.unlink(f)
            for d in sorted(folders, key=len, reverse=True):  # deepest first, emptied
                with contextlib.suppress(OSError):
                    os.rmdir(d)
        source.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return (f"cannot prepare the metrics folder {source} (Katib mounts it empty in each "
                f"trial pod): {exc.strerror}; create it yourself, or point "
                "metricsCollectorSpec.source.fileSystemPath.path to a folder you can write")
    return None


def record_dir_files(source: Path, record: Path) -> None:
    """Note the files a trial left in its TensorFlowEvent folder: the next trial's
    prepare_metrics_dir may remove them (and only them)."""
    files, _ = _tree(source)
    written = _written(record)
    if files and not set(files) <= written:
        with contextlib.suppress(state.StateError):
            state.write_json(record, sorted(written | set(files)))


def _tree(folder: Path) -> tuple[list[str], list[str]]:
    """Every file (symlinks included) and sub-folder under `folder`, as paths."""
    files: list[str] = []
    folders: list[str] = []
    for root, dirs, names in os.walk(folder):
        files.extend(os.path.join(root, n) for n in names)
        for d in dirs:
            path = os.path.join(root, d)
            (files if os.path.islink(path) else folders).append(path)
    return files, folders


def _written(record: Path) -> set[str]:
    try:
        data = state.read_json(record, expect=list)
    except state.StateError:
        return set()
    return {str(p) for p in data or [] if isinstance(p, str)}


def _start(group: ChildGroup, label: str, argv: list[str], cwd: Path, env: dict[str, str],
           out: IO[bytes]) -> tuple[Any, str | None]:
    try:
        return ProcessRun(argv, cwd, env).start(group, label, out), None
    except OSError as exc:
        return None, f"cannot start {argv[0]}: {exc.strerror}"
