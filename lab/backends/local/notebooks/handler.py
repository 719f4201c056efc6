"""Notebook handler of the local backend: one JupyterLab server per Kubeflow Notebook.

`apply` starts JupyterLab as a tracked background process (procs.Registry, as the model
servers are), bound to 127.0.0.1 on a free port, serving the manifest's folder under the
URL path the Notebook controller gives (NB_PREFIX, /notebook/NAMESPACE/NAME/). Its token is
made here and kept in the state folder (server.json, mode 0600), handed to the server in its
environment (JUPYTER_TOKEN: never on a command line other users can read), and put in the URL
that `kflab open notebook NAME` prints. The server reads no user Jupyter configuration (its
own config folder in the state folder), never fetches news or update checks, and its kernels
inherit its CPU set and CUDA_VISIBLE_DEVICES. The status is the controller's shape (mirrored
pod conditions, readyReplicas, containerState), re-derived from the process on every read.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local import fidelity
from lab.backends.local import gpus as gpus_mod
from lab.backends.local.gpu_devices import given
from lab.backends.local.notebooks import containers as nb_containers
from lab.backends.local.notebooks import spec as nb_spec
from lab.backends.local.procs import LOOPBACK, free_port, iter_log
from lab.deps import install_extras
from lab.errors import InputError, LabError, NotFound
from lab.kube.conditions import now
from lab.state import ENV_VAR as STATE_ENV

KIND = "Notebook"
TIMEOUT_ENV = "KFLAB_NOTEBOOK_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
POD_CONDITIONS = ("Initialized", "Ready", "ContainersReady", "PodScheduled")


def proc_id(namespace: str, name: str) -> str:
    return f"nb_{namespace}_{name}"  # '_' is in neither namespaces nor names


def _run(backend: Any, obj: dict[str, Any]) -> Path:
    meta = obj["metadata"]
    return backend.store.run_path(KIND, meta["name"], meta.get("namespace", "default"))


def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    parsed = nb_spec.parse(obj)
    _plan_gpus(parsed)
    engine = nb_containers.engine_for(obj)
    if engine is not None:  # the image runs in a container (notebooks/containers.py)
        nb_containers.preflight(engine, obj, parsed)
        return
    _jupyterlab()


def _jupyterlab() -> None:
    import importlib.util

    if importlib.util.find_spec("jupyterlab") is None:
        raise LabError("JupyterLab is not installed: the local backend runs each Notebook as "
                       "a JupyterLab server", hint=install_extras("notebooks"))


def _plan_gpus(parsed: nb_spec.NotebookSpec) -> tuple[list[str], bool]:
    """(the GPUs it may get, whether the machine has any); refuses what cannot fit."""
    available = gpus_mod.inventory() if parsed.gpus else []
    if parsed.gpus > len(available):
        raise InputError(None, f"spec.template.spec.containers[0].resources.limits."
                               f"{nb_spec.GPU_RESOURCE}",
                         f"Notebook '{parsed.name}' asks for {parsed.gpus} GPU(s) but "
                         f"{gpus_mod.shortage(parsed.gpus, len(available))}",
                         hint="lower it (`kflab doctor` lists the GPUs)")
    return available[:parsed.gpus], gpus_mod.machine_has_gpus()


def _cpu_set(count: int | None) -> list[int] | None:
    """The first `count` CPUs this process may use (None: no limit, or not on Linux)."""
    if count is None or not hasattr(os, "sched_getaffinity"):
        return None
    return sorted(os.sched_getaffinity(0))[:count]


def server_config(root: Path, app_settings: Path) -> dict[str, Any]:
    """JupyterLab's settings: loopback only, no browser, no network calls of its own (no
    news feed, no update check, an extension manager that does not query PyPI). Root may
    run it (a container's user often is; kflab's users are who they are)."""
    return {"ServerApp": {"ip": LOOPBACK, "open_browser": False, "port_retries": 0,
                          "root_dir": str(root), "allow_remote_access": False,
                          "allow_root": hasattr(os, "geteuid") and os.geteuid() == 0},
            "LabApp": {"news_url": None, "extension_manager": "readonly",
                       "check_for_updates_class":
                       "jupyterlab.handlers.announcements.NeverCheckForUpdate",
                       "app_settings_dir": str(app_settings)}}


# Defaults for JupyterLab's own settings (its overrides.json): never offer to fetch news
# (the server would not fetch it anyway); the learner's own settings still apply on top.
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                              "checkForUpdates": False}}


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          timeout: float | None = None, lease: Any = None) -> dict[str, Any]:
    parsed = nb_spec.parse(obj)
    gpus, host_has_gpus = _plan_gpus(parsed)
    engine = nb_containers.engine_for(obj)
    if engine is None:
        _jupyterlab()
    holder = gpus_mod.holder_of(KIND, parsed.namespace, parsed.name)
    if parsed.gpus:  # GPUs no other workload holds, waiting as a Pending pod would
        gpus = gpus_mod.acquire(backend.root, holder, {"main": parsed.gpus},
                                available=gpus, on_pending=lambda msg: backend.emit({
                                    "event": "message", "text": (
                                        f"Notebook {parsed.name} is waiting for GPUs: {msg} "
                                        f"(held by: {', '.join(gpus_mod.holders(backend.root))})"
                                    )}))["main"]
        obj["metadata"].setdefault("annotations", {})[gpus_mod.ANNOTATION] = \
            gpus_mod.labels(gpus)
    run = _run(backend, obj)
    info_file, log = state.path(run, "server.json"), state.path(run, "server.log")
    if engine is not None:
        state.remove(backend.root, info_file)
        rec = nb_containers.start(backend, engine, obj, parsed, base_dir, gpus,
                                  proc_id(parsed.namespace, parsed.name), info_file, log)
        if parsed.gpus:
            gpus_mod.bind(backend.root, holder, rec.pid)
        ignored = [f for f in parsed.ignored
                   if f.rsplit(".", 1)[-1] not in nb_containers.HONOURED]
        return _started(backend, obj, parsed, wait, timeout, ignored,
                        [("notebook.cluster-fields", {"fields": ", ".join(ignored)})]
                        if ignored else [])
    config, settings = state.path(run, "jupyter-config"), state.path(run, "jupyter-settings")
    state.remove(backend.root, info_file)
    state.write_json(state.path(config, "jupyter_server_config.json"),
                     server_config(base_dir.resolve(), settings))
    state.write_json(state.path(settings, "overrides.json"), OVERRIDES)
    cpus = _cpu_set(parsed.cpus)
    port, token = free_port(), secrets.token_hex(24)
    # server.json is written by mkstemp (0600): the token is readable by this user only.
    state.write_json(info_file, {"host": LOOPBACK, "port": port, "token": token,
                                 "prefix": parsed.prefix, "root": str(base_dir.resolve()),
                                 "cpus": cpus, "gpus": gpus})
    env = {**os.environ, **dict(parsed.env), "JUPYTER_TOKEN": token,
           "JUPYTER_CONFIG_DIR": str(config),
           "JUPYTER_RUNTIME_DIR": str(state.path(run, "jupyter-runtime")),
           "NB_PREFIX": parsed.prefix, "PYTHONUNBUFFERED": "1"}
    # Jobs submitted from the notebook (its terminal, or the SDK in a kernel) go to this
    # lab, as a notebook on Kubeflow submits to its own cluster: same state folder, so the
    # same GPU ledger; they see the machine's GPUs, not only the notebook's (gpu_devices.py).
    if STATE_ENV not in dict(parsed.env):
        env[STATE_ENV] = str(backend.root)
    if gpus or host_has_gpus:
        env.update(given(gpus))
    argv = [sys.executable, "-m", "jupyterlab", f"--port={port}",
            f"--ServerApp.base_url={parsed.prefix}/"]
    rec = backend.procs.spawn(proc_id(parsed.namespace, parsed.name), argv,
                              owner=f"{KIND}/{parsed.namespace}/{parsed.name}", log=log,
                              cwd=base_dir, env=env)
    if parsed.gpus:  # held while the server (or a kernel it left running) lives
        gpus_mod.bind(backend.root, holder, rec.pid, token=rec.tag)
    if cpus is not None:  # the kernels it starts inherit the set (a cluster uses a quota)
        import psutil

        try:
            psutil.Process(rec.pid).cpu_affinity(cpus)
        except (psutil.Error, OSError) as exc:
            backend.emit({"event": "message", "text": f"note: cannot limit the notebook to "
                                                      f"{len(cpus)} CPU(s): {exc}"})
    return _started(backend, obj, parsed, wait, timeout, list(parsed.ignored),
                    nb_spec.differences(parsed))


def _started(backend: Any, obj: dict[str, Any], parsed: nb_spec.NotebookSpec, wait: bool,
             timeout: float | None, ignored: list[str],
             found: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    """The server started: the status it starts with, then (with wait) once it answers."""
    meta = obj["metadata"]
    meta["uid"] = str(uuid.uuid4())
    fidelity.announce(backend, obj, found)
    if ignored:
        meta.setdefault("annotations", {})["kflab.dev/ignored-locally"] = ",".join(ignored)
    obj["status"] = _status(parsed.container, started=now(), ready=False)
    backend.store.put(obj)
    if not wait:
        return obj
    limit = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV,
                                                                       DEFAULT_TIMEOUT))
    return _wait_ready(backend, obj, limit)


def _status(container: str, *, started: str, ready: bool, exit_code: int | None = None,
            message: str = "") -> dict[str, Any]:
    """The controller's status: the pod's conditions mirrored, readyReplicas, and the
    notebook container's state (running, or terminated with its exit code)."""
    stamp = now()
    conds = []
    for ctype in POD_CONDITIONS:
        ok = ready or ctype in ("Initialized", "PodScheduled")
        cond = {"type": ctype, "status": "True" if ok else "False",
                "lastProbeTime": stamp, "lastTransitionTime": stamp}
        if not ok:
            cond["reason"] = "ContainersNotReady"
            cond["message"] = f"containers with unready status: [{container}]"
        conds.append(cond)
    if exit_code is None:
        cstate: dict[str, Any] = {"running": {"startedAt": started}}
    else:
        cstate = {"terminated": {"exitCode": exit_code, "startedAt": started,
                                 "finishedAt": stamp, "reason": "Error", "message": message}}
    return {"conditions": conds, "readyReplicas": 1 if ready else 0, "containerState": cstate}


def _info(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    return state.read_json(state.path(_run(backend, obj), "server.json"),
                           fix="apply the Notebook again") or {}


def _answers(info: dict[str, Any]) -> bool:
    """The server's own status API answers (with the token); a container's server, its
    readinessProbe or any HTTP answer at NB_PREFIX."""
    if info.get("container"):
        return nb_containers.answers(info)
    url = f"http://{info['host']}:{info['port']}{info['prefix']}/api/status"
    req = urllib.request.Request(url, headers={
        "Authorization": f"token {info['token']}"})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310
            return resp.status == 200
    except (OSError, ValueError):
        return False


def _wait_ready(backend: Any, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        obj = refresh(backend, obj)
        status = obj["status"]
        if status.get("readyReplicas") == 1 or "terminated" in status.get("containerState", {}):
            return obj
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"]))
    gpus_mod.release(backend.root, gpus_mod.holder_of(KIND, meta["namespace"], meta["name"]))
    return refresh(backend, obj)


def refresh(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Re-derive the status from the server process; store it if it moved."""
    meta = obj["metadata"]
    status = obj.get("status") or {}
    cstate = status.get("containerState") or {}
    if "terminated" in cstate:
        return obj  # final until applied again
    started = (cstate.get("running") or {}).get("startedAt") or now()
    container = _container_name(obj)
    rec = backend.procs.get(proc_id(meta["namespace"], meta["name"]))
    if rec is None or not rec.running:
        # Not our child: its exit code is unknown here; 1 and the log's last lines say so.
        pid = rec.pid if rec is not None else "?"
        backend.procs.stop(proc_id(meta["namespace"], meta["name"]))
        return _save(backend, obj, _status(
            container, started=started, ready=False, exit_code=1,
            message=f"the JupyterLab server (pid {pid}) is not running; last log lines: "
                    f"{_tail(backend, obj)}"))
    ready = _answers(_info(backend, obj))
    if ready != (status.get("readyReplicas") == 1):
        return _save(backend, obj, _status(container, started=started, ready=ready))
    return obj


def _tail(backend: Any, obj: dict[str, Any], n: int = 3) -> str:
    lines = [line for line in logs(backend, obj, None) if line.strip()]
    return " | ".join(lines[-n:]) or "(empty log)"


def _container_name(obj: dict[str, Any]) -> str:
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers") or [{}]
    return str(containers[0].get("name", obj["metadata"]["name"]))


def _save(backend: Any, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    obj["status"] = status
    return backend.store.put_if_current(obj)


def delete(backend: Any, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"]))
    gpus_mod.release(backend.root, gpus_mod.holder_of(KIND, meta["namespace"], meta["name"]))


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    return iter_log(state.path(_run(backend, obj), "server.log"))


def url(backend: Any, name: str, namespace: str = "default") -> str:
    """The URL that opens the Notebook's JupyterLab, token included."""
    obj = backend.get(KIND, name, namespace)
    if obj is None:
        raise NotFound(f"Notebook '{name}' not found in namespace '{namespace}'",
                       hint="list them with `kflab get notebooks`")
    if (obj.get("status") or {}).get("readyReplicas") != 1:
        raise LabError(f"Notebook '{name}' is not ready",
                       hint=f"see `kflab get notebook {name} -o yaml` and "
                            f"`kflab logs notebook {name}`, then `kflab apply` it again")
    info = _info(backend, obj)
    if info.get("container"):  # the image's own server, at NB_PREFIX (no token of ours)
        return f"http://{info['host']}:{info['port']}{info['prefix']}/"
    return (f"http://{info['host']}:{info['port']}{info['prefix']}/lab"
            f"?token={info['token']}")


def server_info(backend: Any, name: str, namespace: str = "default") -> dict[str, Any]:
    """Host, port, token, prefix and root of a running Notebook's server (for tests/tools)."""
    obj = backend.get(KIND, name, namespace)
    if obj is None:
        raise NotFound(f"Notebook '{name}' not found in namespace '{namespace}'")
    return _info(backend, obj)

