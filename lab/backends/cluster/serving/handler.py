"""InferenceServices on a cluster: KServe's controller makes the predictor and its status.

A `file://` storageUri (a folder next to the manifest, which no pod can read) becomes a
ConfigMap mounted where KServe's model servers load models (/mnt/models, the runtimes'
--model_dir); any other storageUri (s3://, gs://, pvc://, https://) is KServe's own business.
Predictions go through a port-forward (127.0.0.1 only) to the predictor Service.
"""

from __future__ import annotations

import copy
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.backends.cluster.workload import model_volume
from lab.errors import InputError, LabError, NotFound

READY_TIMEOUT = 600.0
CONTAINER = "kserve-container"
PREDICT_TIMEOUT = 30.0


MODEL_DIGEST = "kflab.dev/model-sha256"  # on spec.predictor.annotations -> the pod template


def ready(obj: dict[str, Any] | None) -> bool:
    """Ready=True. Not compared with the InferenceService's generation: in Standard (raw
    deployment) mode KServe v0.16 writes the predictor *Deployment's* observedGeneration
    there (inference_service_status.go PropagateRawStatus), which an ISVC change that
    leaves the Deployment alone never moves. Whether the current spec serves is
    rolled_out's question."""
    return obj is not None and common.conditions_true(obj, "Ready") is not None


def rolled_out(obj: dict[str, Any], deployment: dict[str, Any] | None) -> bool:
    """The predictor Deployment runs this spec, as `kubectl rollout status` decides: its
    pod template carries our model digest (KServe copied spec.predictor.annotations into
    it, so it reconciled this spec), the deployment controller saw that template
    (observedGeneration), every replica is updated and available, no old one is left.
    No Deployment (Serverless mode, or no right to read it): Ready is all there is."""
    if deployment is None:
        return True
    want = (common.deep(obj, "spec", "predictor", "annotations") or {}).get(MODEL_DIGEST)
    have = (common.deep(deployment, "spec", "template", "metadata", "annotations")
            or {}).get(MODEL_DIGEST)
    if want is not None and have != want:
        return False
    status = deployment.get("status") or {}
    replicas = int((deployment.get("spec") or {}).get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    return (int(status.get("observedGeneration") or 0)
            >= int(deployment["metadata"].get("generation") or 0)
            and updated >= replicas and int(status.get("replicas") or 0) <= updated
            and int(status.get("availableReplicas") or 0) >= updated)


def _deployment(backend: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    from lab.kube.apierrors import Forbidden
    from lab.kube.objects import Ref, get

    try:
        return get(backend.kube, Ref("apps/v1", "Deployment", predictor_service(obj),
                                     obj["metadata"]["namespace"]), missing_ok=True)
    except Forbidden:
        return None


def serving_this_spec(backend: Any, obj: dict[str, Any] | None) -> bool:
    return obj is not None and ready(obj) and rolled_out(obj, _deployment(backend, obj))


def _local_model(obj: dict[str, Any], base_dir: Path) -> str | None:
    """The folder (relative to base_dir) of a file:// storageUri, else None."""
    uri = common.deep(obj, "spec", "predictor", "model", "storageUri")
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    rel = uri[len("file://"):]
    folder = (base_dir / rel).resolve()
    if not folder.is_dir():
        raise InputError(None, "spec.predictor.model.storageUri",
                         f"{uri}: no folder {folder}",
                         hint="train and save the model first, or fix the path")
    return rel


def prepare(obj: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], str | None, Any]:
    """The InferenceService to apply: a file:// model becomes a mounted ConfigMap."""
    obj = copy.deepcopy(obj)
    rel = _local_model(obj, base_dir)
    if rel is None:
        return obj, None, None
    cm_name, files = common.files_for("InferenceService", obj["metadata"]["name"], base_dir,
                                      subdir=rel, with_runner=False)
    model_volume(obj["spec"]["predictor"], cm_name, files)
    # Retraining into the same folder changes only the ConfigMap, which a running model
    # server never rereads: the digest in the pod template makes it a new template, so
    # KServe's Deployment rolls out a pod that loads the new model.
    digest = hashlib.sha256()
    for rel, data in sorted(files.entries.values()):
        digest.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    annotations = obj["spec"]["predictor"].setdefault("annotations", {})
    annotations[MODEL_DIGEST] = digest.hexdigest()
    return obj, cm_name, files


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    obj, cm_name, files = prepare(obj, base_dir)
    meta = obj["metadata"]
    if cm_name:
        common.ship_files(backend, "InferenceService", meta["name"], meta["namespace"],
                          cm_name, files)
    out = common.apply_object(backend, obj, replace_changed=False)
    if cm_name:
        common.own(backend, cm_name, out)
    if not wait:
        return out
    return common.wait(backend, out, lambda o: serving_this_spec(backend, o),
                       timeout=READY_TIMEOUT, describe="be Ready with this spec rolled out")


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    return common.delete_with_files(backend, kind, name, namespace)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    from lab.kube.logs import selector_for

    return common.pod_lines(backend, namespace, selector_for(kind, name), container=CONTAINER,
                            **opts)


def predictor_service(obj: dict[str, Any]) -> str:
    """KServe (raw deployment) serves the predictor as Service `<name>-predictor`."""
    return f"{obj['metadata']['name']}-predictor"


def predict(backend: Any, name: str, payload: dict[str, Any], namespace: str,
            protocol: str | None) -> dict[str, Any]:
    from lab.kube import inference
    from lab.kube.objects import get
    from lab.kube.portforward import forward

    obj = get(backend.kube, backend.ref("InferenceService", name, namespace), missing_ok=True)
    if obj is None:
        raise NotFound(f"InferenceService '{name}' not found in namespace '{namespace}'",
                       hint="apply it first (`kflab apply -f isvc.yaml`)")
    if not ready(obj):
        raise LabError(f"InferenceService '{name}' is not Ready",
                       hint=f"`kflab get isvc {name} -o yaml` shows why; "
                            f"`kflab logs isvc {name}` the model server's own output")
    proto = protocol or inference.detect(payload) or "v1"
    body = inference.to_protocol(payload, proto)
    with forward(backend.kube, namespace, f"svc/{predictor_service(obj)}") as fwd:
        url = fwd.url + inference.path(proto, name)
        req = urllib.request.Request(url, json.dumps(body).encode(),  # noqa: S310 - loopback
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=PREDICT_TIMEOUT) as resp:  # noqa: S310
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise LabError(f"the model server answered {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            extra = f" ({'; '.join(fwd.errors)})" if fwd.errors else ""
            raise LabError(f"no answer from {name}'s predictor through the port-forward: "
                           f"{exc}{extra}") from None
