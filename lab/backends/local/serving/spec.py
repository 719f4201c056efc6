"""What a KServe InferenceService asks for, reduced to what a local model server needs.

Reads the v1beta1 predictor in both shapes KServe accepts -- the current
`predictor.model.modelFormat` and the older per-framework `predictor.sklearn` /
`predictor.xgboost` -- picks the serving runtime KServe would pick (runtimes.py), and
resolves `storageUri` to a local folder. Anything that only a cluster can honour
(replicas, autoscaling, canary traffic, resources) is collected so the handler can say
once, plainly, that it is ignored here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from lab.backends.local.serving import runtimes
from lab.errors import InputError
from lab.yamlio import exists, user_path

# modelFormat.name -> what the local servers load
FORMATS: dict[str, str] = {
    "sklearn": "scikit-learn estimator (joblib or pickle)",
    "xgboost": "XGBoost Booster (binary, JSON or UBJSON)",
    "lightgbm": "LightGBM Booster (model.bst, text)",
}
PROTOCOLS = ("v1", "v2", "grpc-v2")
# Predictor fields that only change how a cluster schedules or scales the server.
CLUSTER_ONLY = (
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType",
    "autoScaling", "canaryTrafficPercent", "containerConcurrency", "deploymentStrategy",
    "resources", "nodeSelector", "affinity", "tolerations", "serviceAccountName",
    "imagePullSecrets", "priorityClassName", "timeout", "batcher", "logger",
)
# Container-level fields of the model: they shape the pod, not what the server answers.
MODEL_IGNORED = ("runtimeVersion", "image", "imagePullPolicy", "args", "command",
                 "ports", "resources", "readinessProbe", "livenessProbe", "startupProbe",
                 "volumeMounts", "securityContext", "storage")
LEGACY_FRAMEWORKS = ("sklearn", "xgboost", "lightgbm", "onnx", "paddle", "pmml", "pytorch",
                     "tensorflow", "triton", "huggingface")
MIRROR_ENV = "KFLAB_MODEL_MIRROR"
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ServingSpec:
    name: str
    namespace: str
    model_format: str
    model_dir: Path          # a folder holding exactly one model file (or the file itself)
    storage_uri: str
    protocol: str            # v1 | v2 | grpc-v2 (REST serves both v1 and v2 paths)
    runtime: str = "kserve-sklearnserver"  # the ClusterServingRuntime KServe would pick
    ignored: tuple[str, ...] = field(default=())  # cluster-only fields that were set
    env: tuple[tuple[str, str], ...] = field(default=())  # the model container's env values

    @property
    def grpc(self) -> bool:
        return self.protocol == "grpc-v2"


# A transformer or explainer is a second server KServe puts in front of the predictor (its
# own image; the ingress sends requests to it, and it calls the predictor): not wired here.
EXTRA_PROBLEM = ("a {} is not run on the local backend: KServe runs it as a second server "
                 "(its own image) in front of the predictor")
EXTRA_HINT = ("remove it to serve the predictor alone (`kflab predict` then calls the "
              "predictor), or run the whole InferenceService on a cluster backend")

def mirror_root(state: Path) -> Path:
    """Where remote storageUris are looked up locally: $KFLAB_MODEL_MIRROR or <state>/models."""
    env = os.environ.get(MIRROR_ENV)
    return Path(env).expanduser() if env else state / "models"


def parse(obj: dict[str, Any], *, base_dir: Path, state: Path,
          file: str | None = None) -> ServingSpec:
    """Validate an InferenceService for local serving; raise InputError naming the field."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")

    def bad(fld: str, problem: str, hint: str) -> InputError:
        return InputError(file, fld, problem, hint=hint)

    name = meta.get("name")
    if not isinstance(name, str) or not DNS_1035.match(name):
        raise bad("metadata.name", f"'{name}' is not a valid InferenceService name",
                  "use at most 63 lower-case letters, digits and '-', starting with a letter "
                  "(KServe uses it in the model's URL path)")
    if not isinstance(spec, dict) or not isinstance(spec.get("predictor"), dict):
        raise bad("spec.predictor", "missing",
                  "add spec.predictor.model with modelFormat.name and storageUri")
    pred: dict[str, Any] = spec["predictor"]
    for extra in ("transformer", "explainer"):
        if spec.get(extra):
            raise bad(f"spec.{extra}", EXTRA_PROBLEM.format(extra), EXTRA_HINT)
    if pred.get("containers") or pred.get("workerSpec"):
        key = "containers" if pred.get("containers") else "workerSpec"
        raise bad(f"spec.predictor.{key}", "custom containers cannot run locally",
                  "use predictor.model with modelFormat.name: sklearn or xgboost")

    model, where, fmt = _model_section(pred, bad)
    fmt_l = fmt.lower()
    fmt_field = f"{where}.modelFormat.name" if where.endswith("model") else where
    protocol = model.get("protocolVersion", "v1")
    if fmt_l not in FORMATS:
        try:
            upstream = f"; KServe runs it with {runtimes.choose(fmt_l, None, protocol)}"
        except runtimes.NoRuntime:
            upstream = f"; KServe has no runtime for it with protocol {protocol} either"
        raise bad(fmt_field, f"model format '{fmt}' is not served locally{upstream}",
                  f"local formats: {', '.join(FORMATS)}; run other formats on a cluster backend")
    if protocol not in PROTOCOLS:
        raise bad(f"{where}.protocolVersion", f"unknown protocol '{protocol}'",
                  f"use one of: {', '.join(PROTOCOLS)}")
    runtime = _runtime(model, where, fmt_field, fmt_l, protocol, bad)
    uri = model.get("storageUri")
    if (not isinstance(uri, str) or not uri.strip()) and model.get("storage") is not None:
        storage = model.get("storage")
        path = storage.get("path") if isinstance(storage, dict) else None
        raise bad(f"{where}.storage", "KServe's storage spec (a key of the storage-config "
                  "Secret plus a path in that bucket) needs the cluster's credentials; the "
                  "local backend reads storageUri only",
                  "replace the storage block by storageUri: file:///path/to/model-folder"
                  + (f" (a local copy of {path})" if isinstance(path, str) and path else ""))
    if not isinstance(uri, str) or not uri.strip():
        raise bad(f"{where}.storageUri", "missing",
                  "set storageUri: file:///path/to/model-folder (or a path relative to "
                  "the manifest)")
    path = resolve_storage(uri.strip(), base_dir=base_dir, state=state,
                           field=f"{where}.storageUri", file=file)
    ignored = [f"spec.predictor.{k}" for k in CLUSTER_ONLY if pred.get(k) not in (None, {}, [])]
    ignored += [f"{where}.{k}" for k in MODEL_IGNORED if model.get(k) not in (None, {}, [])]
    env = []
    raw_env = model.get("env") or []
    if not isinstance(raw_env, list):
        raise bad(f"{where}.env", f"expected a list, got {type(raw_env).__name__}",
                  "env: [{name: PREDICT_PROBA, value: 'true'}]")
    for i, item in enumerate(raw_env):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad(f"{where}.env[{i}]", "needs a name",
                      "give {name: PREDICT_PROBA, value: 'true'}")
        if "valueFrom" in item:
            ignored.append(f"{where}.env[{i}].valueFrom")
            continue
        env.append((item["name"], str(item.get("value", ""))))
    return ServingSpec(
        name=name, namespace=str(meta.get("namespace") or "default"),
        model_format=fmt_l, model_dir=path, storage_uri=uri.strip(), protocol=protocol,
        runtime=runtime, ignored=tuple(ignored), env=tuple(env),
    )


def _runtime(model: dict[str, Any], where: str, fmt_field: str, fmt: str, protocol: str,
             bad: Any) -> str:
    """KServe's runtime for this model (runtimes.choose). grpc-v2 has no sklearn/xgboost
    runtime upstream; locally it is served by the v1 runtime (a difference the handler
    announces: kserve.protocol.grpc)."""
    version = (model.get("modelFormat") or {}).get("version") \
        if isinstance(model.get("modelFormat"), dict) else None
    chosen = model.get("runtime")
    if chosen is not None and not isinstance(chosen, str):
        raise bad(f"{where}.runtime", "expected a runtime name", "e.g. runtime: kserve-mlserver")
    try:
        name = runtimes.choose(fmt, None if version is None else str(version),
                               "v1" if protocol == "grpc-v2" else protocol, chosen)
    except runtimes.NoRuntime as exc:
        fld = f"{where}.runtime" if chosen is not None else fmt_field
        raise bad(fld, f"KServe would find no serving runtime: {exc}",
                  "use protocolVersion v1 or v2 with modelFormat sklearn or xgboost, and no "
                  "runtime (KServe picks one)") from None
    if fmt not in runtimes.LOCAL.get(name, ()):
        raise bad(f"{where}.runtime", f"runtime '{name}' is not served locally",
                  f"local runtimes: {', '.join(runtimes.LOCAL)}")
    return name


def image_runtime(obj: dict[str, Any]) -> tuple[str, dict[str, Any], str, str] | None:
    """(runtime, the model mapping, its field, protocol) when the predictor's model is one
    the local servers do not load but KServe picks a runtime for (tensorflow, pytorch,
    triton, huggingface...): that runtime's image runs it in a container
    (serving/runtime_images.py). None otherwise (a local model, or no runtime at all: parse
    says why)."""
    from lab.backends.local.serving import runtime_images

    def bad(*_: Any) -> ValueError:
        return ValueError()

    try:
        pred = obj["spec"]["predictor"]
        if not isinstance(pred, dict) or pred.get("containers"):
            return None
        model, where, fmt = _model_section(pred, bad)
        protocol = model.get("protocolVersion", "v1")
        version = (model.get("modelFormat") or {}).get("version") \
            if isinstance(model.get("modelFormat"), dict) else None
        chosen = model.get("runtime") if isinstance(model.get("runtime"), str) else None
        name = runtimes.choose(fmt.lower(), None if version is None else str(version),
                               protocol, chosen)
    except (KeyError, TypeError, ValueError, runtimes.NoRuntime):
        return None
    if fmt.lower() in runtimes.LOCAL.get(name, ()) or name not in runtime_images.IMAGES:
        return None
    return name, model, where, str(protocol)


def runtime_of(obj: dict[str, Any]) -> str | None:
    """The runtime KServe picks for a stored InferenceService (None when it cannot tell)."""
    def bad(*_: Any) -> ValueError:
        return ValueError()

    try:
        model, where, fmt = _model_section(obj["spec"]["predictor"], bad)
        protocol = model.get("protocolVersion", "v1")
        return _runtime(model, where, where, fmt.lower(), protocol, bad)
    except (KeyError, TypeError, ValueError):
        return None


def _model_section(pred: dict[str, Any], bad: Any) -> tuple[dict[str, Any], str, str]:
    """(the model mapping, its field path, the format name) for either predictor shape."""
    model = pred.get("model")
    if model is not None:
        if not isinstance(model, dict):
            raise bad("spec.predictor.model", "must be a mapping",
                      "give modelFormat: {name: sklearn} and storageUri")
        fmt = (model.get("modelFormat") or {}).get("name") \
            if isinstance(model.get("modelFormat"), dict) else None
        if not isinstance(fmt, str) or not fmt:
            raise bad("spec.predictor.model.modelFormat.name", "missing",
                      f"set modelFormat: {{name: sklearn}} (local formats: {', '.join(FORMATS)})")
        return model, "spec.predictor.model", fmt
    legacy = [k for k in LEGACY_FRAMEWORKS if isinstance(pred.get(k), dict)]
    if len(legacy) == 1:
        return pred[legacy[0]], f"spec.predictor.{legacy[0]}", legacy[0]
    if len(legacy) > 1:
        raise bad("spec.predictor", f"several frameworks given ({', '.join(legacy)})",
                  "keep exactly one")
    raise bad("spec.predictor.model", "missing",
              "add model: {modelFormat: {name: sklearn}, storageUri: file:///path/to/model}")


def resolve_storage(uri: str, *, base_dir: Path, state: Path, field: str,
                    file: str | None = None) -> Path:
    """A local file or folder for a storageUri.

    file:// and plain paths are used in place (relative ones against the manifest's folder).
    Remote schemes (gs://, s3://, https://, pvc://, hf://...) cannot be downloaded here; they are
    looked up in the local mirror (<mirror>/<scheme>/<bucket>/<path>) so a published example
    runs unmodified once its files are placed there.
    """
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise InputError(file, field, f"'{uri[:60]}' is not a valid URI: {exc}",
                         hint="use file:///path/to/model or a path") from None
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        raw = unquote(parts.netloc + parts.path) if scheme == "file" else uri
        path = user_path(base_dir, raw, file=file, field=field)
        if not exists(path):
            raise InputError(file, field, f"'{uri}' does not exist ({path})",
                             hint="train and save the model first, or fix the path")
        return path
    mirror = mirror_root(state)
    local = mirror / scheme / parts.netloc / unquote(parts.path).lstrip("/")
    if not local.resolve().is_relative_to(mirror.resolve()):
        # '..' in a bucket or key must not reach past the mirror (file:// names local paths)
        raise InputError(file, field, f"'{uri[:80]}' leads outside the model mirror {mirror}",
                         hint="remove '..' from the URI, or use file:///path/to/model")
    if exists(local):
        return local.resolve()
    raise InputError(
        file, field, f"{scheme}:// storage cannot be fetched in local mode",
        hint=f"download the model yourself, then either set storageUri: file:///path/to/model, "
             f"or put the files in {local} (${MIRROR_ENV} moves that folder) so this manifest "
             "works unchanged",
    )

