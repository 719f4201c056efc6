"""InferenceServices on a cluster: KServe's controller makes the predictor and its status.

A `file://` storageUri (a folder next to the manifest, which no pod can read) becomes a
ConfigMap mounted where KServe's model servers load models (/mnt/models, the runtimes'
--model_dir); any other storageUri (s3://, gs://, pvc://, https://) is KServe's own business.
Predictions go through a port-forward (127.0.0.1 only) to the predictor Service.
"""

from __future__ import annotations

import copy
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


def ready(obj: dict[str, Any] | None) -> bool:
    """Ready=True for the current spec (KServe's observedGeneration caught up)."""
    if obj is None or common.conditions_true(obj, "Ready") is None:
        return False
    seen = (obj.get("status") or {}).get("observedGeneration")
    return seen is None or int(seen) >= int(obj["metadata"].get("generation") or 0)


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
    return common.wait(backend, out, ready, timeout=READY_TIMEOUT, describe="be Ready")


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
