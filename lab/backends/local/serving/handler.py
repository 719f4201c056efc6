"""InferenceService handler of the local backend: one KServe model server per service.

`apply` starts `python -m lab.backends.local.serving.model_server` as a tracked background process
(procs.Registry), so the server outlives the CLI command and `kflab delete` / `kflab down`
stop it. The status is KServe's own shape (url, address, components.predictor, conditions
PredictorReady and Ready, modelStatus) and is re-derived from the process on every read: a
server that died shows as not ready the next time anyone looks.

Re-applying a service that serves is a rollout, as KServe's raw Deployment does it (its
rolling update keeps the old pod until the new one is ready): the new server starts beside
the old one; only once it is ready does it take over. A new version that fails to load
leaves the old one serving, with KServe's status for that (Ready stays True, modelStatus
target FailedToLoad / BlockedByFailedLoad, and Ready False with ProgressDeadlineExceeded
once the Deployment's 600 s progress deadline has passed).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import content, state
from lab.backends.local import fidelity
from lab.backends.local.containers import images
from lab.backends.local.procs import iter_log
from lab.backends.local.serving import custom, runtimes
from lab.backends.local.serving import spec as serving_spec
from lab.errors import LabError, NotFound
from lab.kube import inference
from lab.kube.conditions import get_condition, now
from lab.kube.knative import INFERENCE_SERVICE as ISVC

KIND = "InferenceService"
ROLLOUT = True  # LocalBackend.apply hands a re-applied service its previous version
TIMEOUT_ENV = "KFLAB_SERVING_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
READY, FAILED, CRASHED = "Loaded", "FailedToLoad", "Exited"
# A Deployment's progressDeadlineSeconds as KServe sets it (kserve/kserve
# pkg/controller/v1beta1/inferenceservice/reconcilers/deployment/deployment_reconciler.go
# `setDefaultDeploymentSpec`).
PROGRESS_DEADLINE = 600.0
DEADLINE_REASON = "ProgressDeadlineExceeded"  # not Ready, yet the previous server answers
SERVING, NEXT = "", "next"  # the server that answers, and the one being rolled out


def proc_id(namespace: str, name: str, slot: str = SERVING) -> str:
    # '_' appears in neither namespaces nor names, so ids never collide
    return f"isvc_{namespace}_{name}" + (f"_{slot}" if slot else "")


def _files(backend: Any, obj: dict[str, Any], slot: str = SERVING) -> tuple[Path, Path]:
    meta = obj["metadata"]
    ns = meta.get("namespace", "default")
    run = backend.store.run_path(KIND, meta["name"], ns)
    stem = "server" + (f"-{slot}" if slot else "")
    return state.path(run, f"{stem}.json"), state.path(run, f"{stem}.log")


def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    """Reject a bad manifest before the running version is replaced (a custom container
    also needs a container engine that runs)."""
    if custom.is_custom(obj):
        spec = custom.parse(obj, base_dir=base_dir, root=backend.root)
        engine = custom.engine_for(obj)
        assert engine is not None
        images.preflight(engine, spec.container.image, spec.container.pull_policy,
                         where=f"{spec.container.where}.image")
        return
    serving_spec.parse(obj, base_dir=base_dir, state=backend.root)


def differences(spec: serving_spec.ServingSpec) -> list[tuple[str, dict[str, str]]]:
    """The deliberate local differences (fidelity/rules.py) this service runs into."""
    out: list[tuple[str, dict[str, str]]] = []
    if spec.runtime == "kserve-mlserver":
        try:
            loads = runtimes.model_file(spec.runtime, spec.model_format, spec.model_dir)
            what = loads.path.name if loads.settings is None else \
                f"{loads.path.name}, from {runtimes.SETTINGS_FILE}"
        except (OSError, ValueError):
            what = "no loadable file yet"
        out.append(("kserve.runtime.mlserver", {"format": spec.model_format, "file": what}))
    if spec.grpc:
        out.append(("kserve.protocol.grpc", {"format": spec.model_format}))
    if spec.ignored:
        out.append(("kserve.cluster-fields", {"fields": ", ".join(spec.ignored)}))
    return out


def serving(backend: Any, obj: dict[str, Any] | None) -> bool:
    """True when this (stored) service has a ready server answering now."""
    if obj is None:
        return False
    ready = get_condition(obj.get("status") or {}, "Ready") or {}
    meta = obj["metadata"]
    rec = backend.procs.get(proc_id(meta.get("namespace", "default"), meta["name"]))
    answering = ready.get("status") == "True" or ready.get("reason") == DEADLINE_REASON
    return answering and rec is not None and rec.running


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          timeout: float | None = None, lease: Any = None,
          previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start the model server in the background (procs.Registry records it with its start
    time and its InferenceService) and wait until it is ready. The lease is held only while
    the server starts: the server then outlives this command. With a `previous` version
    that serves, this is a rollout (see the module docstring)."""
    limit = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV,
                                                                       DEFAULT_TIMEOUT))
    spec: Any
    if custom.is_custom(obj):
        spec = custom.parse(obj, base_dir=base_dir, root=backend.root)
        engine = custom.engine_for(obj)
        assert engine is not None
        custom.pull(engine, spec, backend.emit)

        def spawn(slot: str) -> None:
            _spawn_custom(backend, spec, slot, engine, base_dir)
        found = [("kserve.cluster-fields", {"fields": ", ".join(spec.ignored)})] \
            if spec.ignored else []
        loading = f"starting {spec.container.image}"
    else:
        spec = serving_spec.parse(obj, base_dir=base_dir, state=backend.root)

        def spawn(slot: str) -> None:
            _spawn(backend, spec, slot)
        found = differences(spec)
        loading = f"loading {spec.model_format} model from {spec.storage_uri}"
    # a fixed hostPort cannot be held by the old and the new server at once: replaced
    fixed = isinstance(spec, custom.Custom) and spec.host_port is not None
    if previous is not None and wait and serving(backend, previous) and not fixed:
        return _rollout(backend, obj, spec, previous, limit, spawn, found)
    if previous is not None:  # nothing serves: replace it outright
        delete(backend, previous)
        backend.store.delete(KIND, previous["metadata"]["name"],
                             previous["metadata"].get("namespace", "default"))
    fidelity.announce(backend, obj, found)
    spawn(SERVING)
    obj["metadata"].setdefault("generation", 1)
    obj["metadata"]["uid"] = str(uuid.uuid4())  # tells this deployment from a later one
    status: dict[str, Any] = {"observedGeneration": obj["metadata"]["generation"],
                              "modelStatus": {"transitionStatus": "InProgress",
                                              "states": {"activeModelState": "Loading",
                                                         "targetModelState": "Loaded"}}}
    _conditions(status, "Unknown", "ModelLoading", loading)
    obj["status"] = status
    backend.store.put(obj)
    if not wait:
        return obj
    return wait_ready(backend, obj, limit)


def _conditions(status: dict[str, Any], predictor: bool | str, reason: str = "",
                message: str = "") -> None:
    """One reconcile's conditions as KServe v0.16.0 writes them in raw deployment mode
    (lab/kube/knative.py: knative's shape, no lastUpdateTime, no empty reason):
    PredictorReady from the predictor (inference_service_status.go PropagateRawStatus),
    Stopped False unless set (controller.go Reconcile, the force-stop annotation unset),
    IngressReady True on every reconcile (reconcilers/ingress/kube_ingress_reconciler.go
    RawIngressReconciler.Reconcile), and Ready from those two."""
    ISVC.mark(status, "PredictorReady", predictor, reason, message)
    if ISVC.get(status, "Stopped") is None:
        ISVC.mark(status, "Stopped", False)
    ISVC.mark(status, "IngressReady", True)


def _spawn(backend: Any, spec: serving_spec.ServingSpec, slot: str) -> None:
    meta = {"metadata": {"name": spec.name, "namespace": spec.namespace}}
    ready_file, log = _files(backend, meta, slot)
    state.remove(backend.root, ready_file)
    argv = [sys.executable, "-m", "lab.backends.local.serving.model_server", "--name", spec.name,
            "--format", spec.model_format, "--runtime", spec.runtime,
            "--model-dir", str(spec.model_dir), "--ready-file", str(ready_file)]
    if spec.grpc:
        argv.append("--grpc")
    env = {**os.environ, **dict(spec.env)}  # e.g. PREDICT_PROBA, as in the container
    root = str(content.import_root())  # so the server imports this `lab`
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    backend.procs.spawn(proc_id(spec.namespace, spec.name, slot), argv,
                        owner=f"{KIND}/{spec.namespace}/{spec.name}", log=log, env=env)


def _spawn_custom(backend: Any, spec: custom.Custom, slot: str, engine: Any,
                  base_dir: Path) -> None:
    """The custom predictor's container, as a tracked background process (its `run`
    client; the container carries the record's tag as its label)."""
    meta = {"metadata": {"name": spec.name, "namespace": spec.namespace}}
    ready_file, log = _files(backend, meta, slot)
    state.remove(backend.root, ready_file)
    port = custom.host_port(spec)
    pid_id = proc_id(spec.namespace, spec.name, slot)
    tag = backend.procs.new_tag(pid_id)
    run = custom.run(engine, spec, root=backend.root, token=tag, base_dir=base_dir, port=port)
    custom.write_info(ready_file, spec, port, now())
    backend.procs.spawn(pid_id, run.argv(), owner=f"{KIND}/{spec.namespace}/{spec.name}",
                        log=log, tag=tag)


def _rollout(backend: Any, obj: dict[str, Any], spec: Any, previous: dict[str, Any],
             limit: float, spawn: Any, found: list[tuple[str, dict[str, str]]]
             ) -> dict[str, Any]:
    """The new version starts beside the serving one and takes over once ready; if it
    never gets ready, the old one keeps serving and the status says why."""
    meta, ns = obj["metadata"], spec.namespace
    fidelity.announce(backend, obj, found)
    meta["generation"] = int(previous["metadata"].get("generation", 1)) + 1
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = previous["metadata"].get("creationTimestamp")
    status = copy.deepcopy(previous.get("status") or {})
    status["observedGeneration"] = meta["generation"]
    if (get_condition(status, "Ready") or {}).get("reason") == DEADLINE_REASON:
        # a new rollout progresses again: the old pod is available, so the predictor is
        _conditions(status, True)
    # KServe's UpdateModelRevisionStates: the target moves, the active model stays Loaded.
    status["modelStatus"] = {"transitionStatus": "InProgress",
                             "states": {"activeModelState": "Loaded",
                                        "targetModelState": "Loading"},
                             "copies": {"failedCopies": 0, "totalCopies": 1}}
    obj["status"] = status
    backend.store.put(obj)
    spawn(NEXT)
    try:
        info, problem = _wait_next(backend, obj, spec, limit)
    except BaseException as exc:  # Ctrl-C, SIGTERM: the old version serves, the new goes
        backend.procs.stop(proc_id(ns, spec.name, NEXT))
        with contextlib.suppress(LabError):
            _blocked(backend, obj, f"the rollout was stopped before the new server was "
                                   f"ready ({type(exc).__name__})")
        raise
    if problem is None:
        return _promote(backend, obj, info)
    backend.procs.stop(proc_id(ns, spec.name, NEXT))
    return _blocked(backend, obj, problem)


def _blocked(backend: Any, obj: dict[str, Any], problem: str) -> dict[str, Any]:
    """The new version failed to load: KServe's UpdateModelRevisionStates(FailedToLoad)
    moves only the target; the active model, and Ready, stay as they were."""
    obj["status"]["modelStatus"] = {
        "transitionStatus": "BlockedByFailedLoad",
        "states": {"activeModelState": "Loaded", "targetModelState": "FailedToLoad"},
        "copies": {"failedCopies": 1, "totalCopies": 1},
        "lastFailureInfo": {"reason": "ModelLoadFailed", "message": problem, "time": now()},
    }
    return backend.store.put_if_current(obj)


def _wait_next(backend: Any, obj: dict[str, Any], spec: Any,
               limit: float) -> tuple[dict[str, Any], str | None]:
    """Wait for the rolled-out server: (its ready info, None) or ({}, why it failed)."""
    ready_file, _ = _files(backend, obj, NEXT)
    deadline = time.monotonic() + limit
    while True:
        info = _loaded(ready_file)
        rec = backend.procs.get(proc_id(spec.namespace, spec.name, NEXT))
        if info.get("state") == READY and _answers(info, spec.name):
            return info, None
        if info.get("state") == FAILED:
            return {}, str(info.get("error", ""))
        if rec is None or not rec.running:
            return {}, ("the new model server exited; last log lines: "
                        f"{_tail(backend, obj, slot=NEXT)}")
        if time.monotonic() >= deadline:
            return {}, (f"the new model server was not ready within {limit:.0f}s (raise "
                        f"${TIMEOUT_ENV}); last log lines: {_tail(backend, obj, slot=NEXT)}")
        time.sleep(0.1)


def _promote(backend: Any, obj: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """The rolled-out server becomes the serving one; the old one is stopped."""
    meta = obj["metadata"]
    ns, name = meta["namespace"], meta["name"]
    backend.procs.rename(proc_id(ns, name, NEXT), proc_id(ns, name))  # stops the old one
    for new, old in zip(_files(backend, obj, NEXT), _files(backend, obj), strict=True):
        with contextlib.suppress(FileNotFoundError):
            os.replace(new, old)  # the server keeps writing its log under the new name
    old_url = (obj.get("status") or {}).get("url")
    obj = _ready(backend, obj, info)
    if obj["status"]["url"] != old_url:
        fidelity.announce(backend, obj, [("kserve.rollout.url", {"url": obj["status"]["url"]})])
        backend.store.put_if_current(obj)
    return obj


def _read(ready_file: Path) -> dict[str, Any]:
    try:
        data = json.loads(ready_file.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _url(info: dict[str, Any]) -> str:
    return f"http://{info['host']}:{info['port']}"


def _loaded(ready_file: Path) -> dict[str, Any]:
    """The server's ready file; a custom container's says Loaded once its readiness probe
    answers (kflab writes it: the image knows nothing of kflab's file)."""
    info = _read(ready_file)
    if info.get("custom") and info.get("state") != READY and custom.ready(info):
        info["state"] = READY
        with contextlib.suppress(LabError):
            state.write_json(ready_file, info)
    return info


def _answers(info: dict[str, Any], name: str) -> bool:
    """The readiness probe: a custom container's own, KServe's model servers' otherwise."""
    if info.get("custom"):
        return custom.ready(info)
    return _probe_url(_url(info), name)


def wait_ready(backend: Any, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Poll until the server is ready (and answers its readiness probe) or has failed."""
    deadline = time.monotonic() + timeout
    while True:
        obj = refresh(backend, obj)
        ready = get_condition(obj["status"], "Ready") or {}
        if ready.get("status") == "False":
            return obj
        if ready.get("status") == "True" and _probe(backend, obj):
            return obj
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"]))
    return _fail(backend, obj, "ModelLoadFailed", "RuntimeUnhealthy",
                 f"the model server was not ready within {timeout:.0f}s "
                 f"(raise ${TIMEOUT_ENV}); last log lines: {_tail(backend, obj)}")


def _probe(backend: Any, obj: dict[str, Any]) -> bool:
    ready_file, _ = _files(backend, obj)
    info = _read(ready_file)
    if info.get("custom"):
        return custom.ready(info)
    return _probe_url(obj["status"]["url"], obj["metadata"]["name"])


def _probe_url(url: str, name: str) -> bool:
    """KServe's readiness probe: GET /v1/models/NAME answers ready."""
    try:
        with urllib.request.urlopen(f"{url}/v1/models/{name}",  # noqa: S310 - loopback URL
                                    timeout=2) as resp:
            return bool(json.loads(resp.read()).get("ready"))
    except (OSError, ValueError):
        return False


def _tail(backend: Any, obj: dict[str, Any], n: int = 3, slot: str = SERVING) -> str:
    _, log = _files(backend, obj, slot)
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
    info = _loaded(ready_file) if alive else _read(ready_file)
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
    if ready.get("status") == "True" and _past_deadline(status):
        return _deadline(backend, obj)
    return obj


def _past_deadline(status: dict[str, Any]) -> bool:
    """A rollout blocked by a failed load for longer than the Deployment's deadline."""
    model = status.get("modelStatus") or {}
    since = (model.get("lastFailureInfo") or {}).get("time")
    if model.get("transitionStatus") != "BlockedByFailedLoad" or not since:
        return False
    try:
        then = datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return False
    return (datetime.now(UTC) - then).total_seconds() > PROGRESS_DEADLINE


def _deadline(backend: Any, obj: dict[str, Any]) -> dict[str, Any]:
    """KServe's PropagateRawStatus: a Progressing=False condition with a message makes the
    predictor not ready, while the old pod keeps serving."""
    message = (f"the rollout of generation {obj['metadata'].get('generation')} has timed out "
               f"progressing (progressDeadlineSeconds {PROGRESS_DEADLINE:.0f}); the previous "
               "model still serves")
    status = obj["status"]
    _conditions(status, False, DEADLINE_REASON, message)
    return backend.store.put_if_current(obj)


def _ready(backend: Any, obj: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    status = obj.setdefault("status", {})
    url = _url(info)
    predictor: dict[str, Any] = {"url": url, "restUrl": url, "address": {"url": url}}
    if info.get("grpc_port"):
        predictor["grpcUrl"] = f"grpc://{info['host']}:{info['grpc_port']}"
    status.update(url=url, address={"url": url}, components={"predictor": predictor})
    status["modelStatus"] = {"transitionStatus": "UpToDate",
                             "states": {"activeModelState": "Loaded",
                                        "targetModelState": "Loaded"},
                             "copies": {"failedCopies": 0, "totalCopies": 1}}
    _conditions(status, True)
    return backend.store.put_if_current(obj)


def _fail(backend: Any, obj: dict[str, Any], reason: str, failure: str,
          message: str) -> dict[str, Any]:
    """Mark the service not ready with the server's own error (KServe's failure fields)."""
    status = obj.setdefault("status", {})
    _conditions(status, False, reason, message)
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
    return backend.store.put_if_current(obj)




def delete(backend: Any, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    backend.procs.stop(proc_id(meta["namespace"], meta["name"], NEXT))
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
    # past its progress deadline a failed rollout is not Ready, yet the old server answers
    if ready.get("status") != "True" and ready.get("reason") != DEADLINE_REASON:
        raise LabError(f"{KIND} '{name}' is not ready ({ready.get('reason') or 'pending'}): "
                       f"{ready.get('message', '')}".rstrip(": "),
                       hint=f"see `kflab logs isvc {name}`, fix, then `kflab apply` again")
    protocol = protocol or inference.detect(payload) or "v1"
    if protocol not in inference.PROTOCOLS:
        raise LabError(f"unknown protocol '{protocol}'", hint="use v1 or v2")
    if protocol == "v1" and serving_spec.runtime_of(obj) == "kserve-mlserver":
        raise LabError(f"{KIND} '{name}' runs on kserve-mlserver, which answers only the V2 "
                       "protocol (as on a cluster)",
                       hint="send a V2 body ({\"inputs\": [...]}) or add --protocol v2")
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
