"""A KServe custom predictor (`spec.predictor.containers`) as a container of its image.

KServe v0.16 (pkg/apis/serving/v1beta1/predictor_custom.go `CustomPredictor.Default` and
`GetContainer`; the raw Deployment and Service reconcilers): the first container is
`kserve-container`, it listens on its first containerPort (8080 when it names none, KServe's
InferenceServiceDefaultHttpPort), `STORAGE_URI` in its env makes the storage initializer
put the model at /mnt/models, and the protocol is V1 unless `PROTOCOL` says v2.

Locally the container runs through the engine with that port published on 127.0.0.1 only
(a free port, or the container's `hostPort` when it sets one), a `STORAGE_URI` resolved as
a model's storageUri is (file://, or the model mirror) and mounted read-only at /mnt/models,
and the server is Ready once its readinessProbe answers (httpGet or tcpSocket), or, without
one, once its port accepts connections. The status is the one KServe writes for any
predictor (handler.py `_ready`).
"""

from __future__ import annotations

import copy
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import state
from lab.backends.local.containers import choice, images, probe, workload
from lab.backends.local.containers import spec as cspec
from lab.backends.local.containers.engine import Engine
from lab.backends.local.procs import LOOPBACK, free_port
from lab.backends.local.runners import Mount
from lab.backends.local.serving import runtime_images
from lab.backends.local.serving import spec as serving_spec
from lab.errors import InputError, LabError

CONTAINER = "kserve-container"
DEFAULT_PORT = 8080  # constants.InferenceServiceDefaultHttpPort
MODEL_DIR = "/mnt/models"  # constants.DefaultModelLocalMountPath
STORAGE_ENV, PROTOCOL_ENV = "STORAGE_URI", "PROTOCOL"
# Predictor fields beside `containers` that only shape or scale the pod on a cluster.
CLUSTER_ONLY = (*serving_spec.CLUSTER_ONLY, "volumes", "initContainers", "securityContext",
                "hostNetwork", "dnsPolicy", "runtimeClassName")


@dataclass(frozen=True)
class Custom:
    name: str
    namespace: str
    container: cspec.ContainerSpec
    port: int  # the container's port
    host_port: int | None  # the manifest's hostPort, if any
    model_dir: Path | None  # STORAGE_URI resolved locally
    storage_uri: str
    protocol: str
    probe: dict[str, Any]  # readinessProbe (httpGet / tcpSocket), or {}
    ignored: tuple[str, ...]


def is_custom(obj: dict[str, Any]) -> bool:
    """A custom predictor, or a model whose runtime only its image serves."""
    pred = (obj.get("spec") or {}).get("predictor") if isinstance(obj.get("spec"), dict) \
        else None
    return isinstance(pred, dict) and (bool(pred.get("containers"))
                                       or serving_spec.image_runtime(obj) is not None)


def _as_custom(obj: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """(the object with its predictor as KServe's container, the runtime, the model's
    storageUri): a model whose runtime runs by image becomes that runtime's container."""
    found = serving_spec.image_runtime(obj)
    if found is None:
        return obj, None, None
    runtime, model, where, protocol = found
    name = str(obj["metadata"].get("name"))
    c = runtime_images.container(runtime, name, model)
    c["readinessProbe"] = runtime_images.readiness(name, protocol)
    c.setdefault("env", [])
    c["env"] = [*c["env"], {"name": PROTOCOL_ENV, "value": "v2" if protocol == "v2"
                            else "v1"}]
    out = copy.deepcopy(obj)
    out["spec"]["predictor"] = {k: v for k, v in obj["spec"]["predictor"].items()
                                if k not in serving_spec.LEGACY_FRAMEWORKS and k != "model"}
    out["spec"]["predictor"]["containers"] = [c]
    uri = model.get("storageUri")
    return out, runtime, (f"{where}.storageUri", uri) if isinstance(uri, str) else None


def parse(obj: dict[str, Any], *, base_dir: Path, root: Path) -> Custom:
    """Validate a custom predictor (or a model served by its runtime's image); InputError
    names the field."""
    obj, _, storage = _as_custom(obj)
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not serving_spec.DNS_1035.match(name):
        raise InputError(None, "metadata.name", f"'{name}' is not a valid InferenceService "
                         "name", hint="use at most 63 lower-case letters, digits and '-', "
                                      "starting with a letter")
    spec = obj["spec"]
    for extra in ("transformer", "explainer"):
        if spec.get(extra):
            raise InputError(None, f"spec.{extra}", serving_spec.EXTRA_PROBLEM.format(extra),
                             hint=serving_spec.EXTRA_HINT)
    pred = spec["predictor"]
    containers = pred["containers"]
    if not isinstance(containers, list) or not isinstance(containers[0], dict):
        raise InputError(None, "spec.predictor.containers", "expected a list of containers",
                         hint="containers: [{name: kserve-container, image: ...}]")
    first = containers[0]
    where = "spec.predictor.containers[0]"
    if len(containers) > 1 and first.get("name") != CONTAINER:
        raise InputError(None, f"{where}.name", f"with several containers KServe serves the "
                         f"one named {CONTAINER}, and the first is {first.get('name')!r}",
                         hint=f"name the model server's container {CONTAINER}")
    env = [(str(e["name"]), str(e.get("value", ""))) for e in first.get("env") or []
           if isinstance(e, dict) and "name" in e and "valueFrom" not in e]
    container = cspec.read(first, where, env=env)
    values = dict(env)
    protocol = values.get(PROTOCOL_ENV, "v1")
    if protocol not in ("v1", "v2"):
        raise InputError(None, f"{where}.env.{PROTOCOL_ENV}",  # predictor_custom.go
                         f"invalid protocol {protocol!r}, expected one of v1, v2",
                         hint=f"set {PROTOCOL_ENV} to v1 or v2 (or remove it)")
    uri, field = values.get(STORAGE_ENV, ""), f"{where}.env.{STORAGE_ENV}"
    if storage is not None:  # the model's storageUri, for its runtime's image
        field, uri = storage
    model = serving_spec.resolve_storage(uri, base_dir=base_dir, state=root,
                                         field=field) if uri else None
    port = container.ports[0] if container.ports else cspec.Port(DEFAULT_PORT)
    readiness = first.get("readinessProbe") if isinstance(first.get("readinessProbe"), dict) \
        else {}
    ignored = [f"spec.predictor.{k}" for k in CLUSTER_ONLY if pred.get(k) not in (None, {}, [])]
    ignored += [f"spec.predictor.containers[{i}]" for i in range(1, len(containers))]
    ignored += [f"{where}.{k}" for k in ("livenessProbe", "startupProbe", "volumeMounts",
                                         "securityContext") if first.get(k)]
    return Custom(name, str(meta.get("namespace") or "default"), container, port.container,
                  port.host, model, uri, protocol, readiness, tuple(ignored))


def engine_for(obj: dict[str, Any]) -> Engine | None:
    """The engine for the predictor's container: custom containers always need one."""
    as_custom, runtime, _ = _as_custom(obj)
    image = ((as_custom["spec"]["predictor"]["containers"] or [{}])[0] or {}).get("image")
    found = [(f"KServe's runtime {runtime} for spec.predictor" if runtime else
              "spec.predictor.containers[0].image", image)]
    always = {"metadata": {"annotations": {choice.ANNOTATION: "container"}}}
    return choice.engine_for(found, always,
                             f"InferenceService {obj['metadata'].get('name')}")


def host_port(custom: Custom) -> int:
    """The 127.0.0.1 port the predictor answers on: hostPort when the manifest sets one
    (refused in one line when another program holds it), else a free one."""
    if custom.host_port is None:
        return free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, custom.host_port))
        except OSError as exc:
            raise LabError(f"InferenceService {custom.name}: hostPort {custom.host_port} "
                           f"({custom.container.where}.ports) is already taken on "
                           f"{LOOPBACK}: {exc.strerror}",
                           hint="stop what listens there, or remove hostPort (kflab then "
                                "picks a free port)") from None
    return custom.host_port


def run(engine: Engine, custom: Custom, *, root: Path, token: str, base_dir: Path,
        port: int) -> Any:
    """The predictor's ContainerRun (the handler starts it as a tracked background process)."""
    mounts = [Mount(custom.model_dir, MODEL_DIR, read_only=True)] \
        if custom.model_dir is not None else []
    return workload.container(engine, custom.container, root=root, token=token,
                              owner=f"InferenceService/{custom.namespace}/{custom.name}",
                              part="predictor", env=list(custom.container.env),
                              base_dir=None, mounts=mounts,
                              publish=[(port, custom.port)])


def pull(engine: Engine, custom: Custom, emit: Any) -> None:
    if (note := workload.limits_note(engine, [custom.container])) and emit:
        emit({"event": "message", "text": note})
    images.ensure(engine, custom.container.image, custom.container.pull_policy,
                  where=f"{custom.container.where}.image", emit=emit)


def write_info(ready_file: Path, custom: Custom, port: int, started: str) -> None:
    """What the handler reads back (as the model server's ready file): where it answers
    and how to tell it is ready."""
    state.write_json(ready_file, {"state": "Loading", "host": LOOPBACK, "port": port,
                                  "custom": {"probe": custom.probe, "port": custom.port},
                                  "started": started})


def ready(info: dict[str, Any]) -> bool:
    """The container's readinessProbe through the published port (containers/probe.py)."""
    port = info.get("port")
    return isinstance(port, int) and probe.answers(port, (info.get("custom") or {}).get(
        "probe") or {})
