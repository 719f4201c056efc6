"""InferenceService handler of the local backend: one KServe model server per service.

`apply` starts `python -m lab.backends.local.serving.model_server` as a tracked background process
(procs.Registry), so the server outlives the CLI command and `kflab delete` / `kflab down`
stop it. The status is KServe's own shape (url, address, components.predictor, conditions
PredictorReady and Ready, modelStatus) and is re-derived from the process on every read: a
server that died shows as not ready the next time anyone looks.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab import content, state
from lab.backends.local.procs import iter_log
from lab.backends.local.serving import spec as serving_spec
from lab.errors import LabError, NotFound
from lab.kube import inference
from lab.kube.conditions import get_condition, now, set_condition

KIND = "InferenceService"
TIMEOUT_ENV = "KFLAB_SERVING_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
READY, FAILED, CRASHED = "Loaded", "FailedToLoad", "Exited"


def proc_id(namespace: str, name: str) -> str:
    # '_' appears in neither namespaces nor names, so ids never collide
    return f"isvc_{namespace}_{name}"


def _files(backend: Any, obj: dict[str, Any]) -> tuple[Path, Path]:
    meta = obj["metadata"]
    ns = meta.get("namespace", "default")
    run = backend.store.run_path(KIND, meta["name"], ns)
    return state.path(run, "server.json"), state.path(run, "server.log")


def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    """Reject a bad manifest before the running version is replaced."""
    serving_spec.parse(obj, base_dir=base_dir, state=backend.root)


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          timeout: float | None = None, lease: Any = None) -> dict[str, Any]:
    """Start the model server in the background (procs.Registry records it with its start
    time and its InferenceService) and wait until it is ready. The lease is held only while
    the server starts: the server then outlives this command."""
    spec = serving_spec.parse(obj, base_dir=base_dir, state=backend.root)
    ready_file, log = _files(backend, obj)
    state.remove(backend.root, ready_file)
    if spec.ignored:
        backend.emit({"event": "message", "text": (
            "note: cluster-only fields ignored on the local backend (one server, no "
            f"autoscaling): {', '.join(spec.ignored)}")})
    argv = [sys.executable, "-m", "lab.backends.local.serving.model_server", "--name", spec.name,
            "--format", spec.model_format, "--model-dir", str(spec.model_dir),
            "--ready-file", str(ready_file)]
    if spec.grpc:
        argv.append("--grpc")
    env = {**os.environ, **dict(spec.env)}  # e.g. PREDICT_PROBA, as in the container
    root = str(content.import_root())  # so the server imports this `lab`
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    backend.procs.spawn(proc_id(spec.namespace, spec.name), argv,
                        owner=f"{KIND}/{spec.namespace}/{spec.name}", log=log, env=env)
    obj["metadata"].setdefault("generation", 1)
    obj["metadata"]["uid"] = str(uuid.uuid4())  # tells this deployment from a later one
    status: dict[str, Any] = {"observedGeneration": obj["metadata"]["generation"],
                              "modelStatus": {"transitionStatus": "InProgress",
                                              "states": {"activeModelState": "Loading",
                                                         "targetModelState": "Loaded"}}}
    set_condition(status, "PredictorReady", "Unknown", "ModelLoading",
                  f"loading {spec.model_format} model from {spec.storage_uri}")
    set_condition(status, "Ready", "Unknown", "ModelLoading", "waiting for the predictor")
    obj["status"] = status
    backend.store.put(obj)
    if not wait:
        return obj
    limit = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV,
                                                                       DEFAULT_TIMEOUT))
    return wait_ready(backend, obj, limit)


def wait_ready(backend: Any, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Poll until the server is ready (and answers its readiness probe) or has failed."""
    deadline = time.monotonic() + timeout
    while True:
        obj = refresh(backend, obj)
        ready = get_condition(obj["status"], "Ready") or {}
        if ready.get("status") == "False":
            return obj
        if ready.get("status") == "True" and _probe(obj):
            return obj
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"]))
    return _fail(backend, obj, "ModelLoadFailed", "RuntimeUnhealthy",
                 f"the model server was not ready within {timeout:.0f}s "
                 f"(raise ${TIMEOUT_ENV}); last log lines: {_tail(backend, obj)}")


def _probe(obj: dict[str, Any]) -> bool:
    """KServe's readiness probe: GET /v1/models/NAME answers ready."""
    url = f"{obj['status']['url']}/v1/models/{obj['metadata']['name']}"
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback URL
            return bool(json.loads(resp.read()).get("ready"))
    except (OSError, ValueError):
        return False


def _tail(backend: Any, obj: dict[str, Any], n: int = 3) -> str:
    _, log = _files(backend, obj)
    lines = [line for line in iter_log(log) if line.strip()]
    return " | ".join(lines[-n:]) or "(empty log)"


def refresh(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Derive the status from the server process and its ready file; store it if it moved."""
    status = obj.get("status") or {}
    ready = get_condition(status, "Ready") or {}
    meta = obj["metadata"]
    if ready.get("status") == "False":
        return obj  # final until re-applied
    rec = backend.procs.get(proc_id(meta["namespace"], meta["name"]))
    alive = rec is not None and rec.running
    ready_file, _ = _files(backend, obj)
    try:
        info = json.loads(ready_file.read_text())
    except (OSError, ValueError):
        info = {}
    if info.get("state") == FAILED:
        backend.procs.stop(proc_id(meta["namespace"], meta["name"]), grace=2)
        return _fail(backend, obj, "ModelLoadFailed", "ModelLoadFailed", info.get("error", ""))
    if not alive:
        pid = rec.pid if rec else info.get("pid", "?")
        backend.procs.stop(proc_id(meta["namespace"], meta["name"]))  # forget the dead one
        return _fail(backend, obj, "ServerExited", "RuntimeUnhealthy",
                     f"the model server process (pid {pid}) is not running; "
                     f"last log lines: {_tail(backend, obj)}")
    if info.get("state") == READY and ready.get("status") != "True":
        return _ready(backend, obj, info)
    return obj


def _ready(backend: Any, obj: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    status = obj.setdefault("status", {})
    url = f"http://{info['host']}:{info['port']}"
    predictor: dict[str, Any] = {"url": url, "restUrl": url, "address": {"url": url}}
    if info.get("grpc_port"):
        predictor["grpcUrl"] = f"grpc://{info['host']}:{info['grpc_port']}"
    status.update(url=url, address={"url": url}, components={"predictor": predictor})
    status["modelStatus"] = {"transitionStatus": "UpToDate",
                             "states": {"activeModelState": "Loaded",
                                        "targetModelState": "Loaded"},
                             "copies": {"failedCopies": 0, "totalCopies": 1}}
    set_condition(status, "PredictorReady", True)
    set_condition(status, "Ready", True)
    return _save(backend, obj)


def _fail(backend: Any, obj: dict[str, Any], reason: str, failure: str,
          message: str) -> dict[str, Any]:
    """Mark the service not ready with the server's own error (KServe's failure fields)."""
    status = obj.setdefault("status", {})
    set_condition(status, "PredictorReady", False, reason, message)
    set_condition(status, "Ready", False, reason, message)
    loaded = failure != "ModelLoadFailed"
    status["modelStatus"] = {
        "transitionStatus": "UpToDate" if loaded else "BlockedByFailedLoad",
        "states": {"activeModelState": "Loaded" if loaded else "FailedToLoad",
                   "targetModelState": "Loaded"},
        "copies": {"failedCopies": 1, "totalCopies": 1},
        "lastFailureInfo": {"reason": failure, "message": message, "time": now()},
    }
    if loaded:  # the model had loaded; the runtime went away
        status["modelStatus"]["states"]["activeModelState"] = ""
    return _save(backend, obj)


def _save(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """Store a status update unless the service was deleted or re-applied meanwhile (by
    another kflab process): a stale update must not overwrite the newer deployment."""
    meta = obj["metadata"]
    current = backend.store.get(KIND, meta["name"], meta["namespace"])
    if current is None or (current.get("metadata") or {}).get("uid") != meta.get("uid"):
        return obj
    return backend.store.put(obj)


def delete(backend: Any, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"]))


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    _, log = _files(backend, obj)
    return iter_log(log)


def predict(backend: Any, name: str, payload: dict[str, Any], namespace: str = "default",
            protocol: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Send one prediction to the service's server; V1 and V2 bodies are converted as needed."""
    obj = backend.get(KIND, name, namespace)
    if obj is None:
        raise NotFound(f"{KIND} '{name}' not found in namespace '{namespace}'",
                       hint="list them with `kflab get isvc`")
    ready = get_condition(obj.get("status") or {}, "Ready") or {}
    if ready.get("status") != "True":
        raise LabError(f"{KIND} '{name}' is not ready ({ready.get('reason') or 'pending'}): "
                       f"{ready.get('message', '')}".rstrip(": "),
                       hint=f"see `kflab logs isvc {name}`, fix, then `kflab apply` again")
    protocol = protocol or inference.detect(payload) or "v1"
    if protocol not in inference.PROTOCOLS:
        raise LabError(f"unknown protocol '{protocol}'", hint="use v1 or v2")
    body = json.dumps(inference.to_protocol(payload, protocol)).encode()
    url = obj["status"]["url"] + inference.path(protocol, name)
    req = urllib.request.Request(url, data=body, method="POST",  # noqa: S310 - loopback
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise LabError(f"the model server rejected the request (HTTP {exc.code}): {detail}",
                       hint="check the input's shape against what the model was trained on",
                       ) from None
    except (OSError, ValueError) as exc:
        raise LabError(f"no answer from {url}: {exc}",
                       hint=f"see `kflab get isvc {name}` and `kflab logs isvc {name}`") from None
