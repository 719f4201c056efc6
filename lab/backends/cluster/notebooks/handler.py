"""Notebooks on a cluster: the Notebook controller runs the server, kflab forwards to it.

The controller (kubeflow/kubeflow components/notebook-controller v1.10, standalone: no
Istio) makes a StatefulSet `NAME` (pod `NAME-0`, labelled `notebook-name: NAME`) from the
template, sets NB_PREFIX=/notebook/NAMESPACE/NAME on the first container and a Service
`NAME` on port 80 to its first port (8888 by default); it mirrors the pod's conditions,
readyReplicas and the container state into the status. kflab applies the Notebook as
written, plus the work folder as a read-only ConfigMap volume at `lab-files` in the first
container's working directory (/home/jovyan by default), and forwards 127.0.0.1 to the
Service for `kflab open notebook`. The Kubeflow notebook images run JupyterLab without a
token (Kubeflow puts its own authentication in front); the forward listens on loopback only.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.errors import InputError, LabError, NotFound

READY_TIMEOUT = 600.0
SERVING_PORT = 80  # the Service's port (DefaultServingPort)
HOME = "/home/jovyan"  # the controller's default workingDir
FILES_VOLUME = "kflab-lab-files"


def ready(obj: dict[str, Any] | None) -> bool:
    return bool(obj) and (obj.get("status") or {}).get("readyReplicas") == 1


def prepare(obj: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], str, Any]:
    """The Notebook to apply, with the work folder mounted read-only in the first container."""
    obj = copy.deepcopy(obj)
    pod = common.deep(obj, "spec", "template", "spec")
    containers = pod.get("containers") if isinstance(pod, dict) else None
    if not isinstance(containers, list) or not containers or \
            not isinstance(containers[0], dict):
        raise InputError(None, "spec.template.spec.containers", "missing",
                         hint="give the notebook container (name and image)")
    cm_name, files = common.files_for("Notebook", obj["metadata"]["name"], base_dir,
                                      with_runner=False)
    first = containers[0]
    workdir = first.get("workingDir") or HOME
    volumes = [v for v in pod.get("volumes") or [] if v.get("name") != FILES_VOLUME]
    pod["volumes"] = [*volumes, {"name": FILES_VOLUME,
                                 "configMap": {"name": cm_name, "items": files.items()}}]
    mounts = [m for m in first.get("volumeMounts") or [] if m.get("name") != FILES_VOLUME]
    first["volumeMounts"] = [*mounts, {"name": FILES_VOLUME, "readOnly": True,
                                       "mountPath": f"{workdir.rstrip('/')}/lab-files"}]
    return obj, cm_name, files


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    obj, cm_name, files = prepare(obj, base_dir)
    meta = obj["metadata"]
    common.ship_files(backend, "Notebook", meta["name"], meta["namespace"], cm_name, files)
    out = common.apply_object(backend, obj, replace_changed=False)
    common.own(backend, cm_name, out)
    if not wait or backend.dry_run:
        return out
    return common.wait(backend, out, ready, timeout=READY_TIMEOUT, describe="be ready")


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    return common.delete_with_files(backend, kind, name, namespace)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    from lab.kube.logs import selector_for

    return common.pod_lines(backend, namespace, selector_for(kind, name), **opts)


@contextlib.contextmanager
def forward(backend: Any, name: str, namespace: str) -> Iterator[str]:
    """127.0.0.1:PORT forwarded to the Notebook's Service; yields the JupyterLab URL."""
    from lab.kube.objects import get
    from lab.kube.portforward import forward as port_forward

    obj = get(backend.kube, backend.ref("Notebook", name, namespace), missing_ok=True)
    if obj is None:
        raise NotFound(f"Notebook '{name}' not found in namespace '{namespace}'",
                       hint="list them with `kflab get notebooks`")
    if not ready(obj):
        raise LabError(f"Notebook '{name}' is not ready",
                       hint=f"`kflab get notebook {name} -o yaml` shows its conditions; "
                            f"`kflab logs notebook {name}` the server's output")
    with port_forward(backend.kube, namespace, f"svc/{name}", SERVING_PORT) as fwd:
        yield f"{fwd.url}/notebook/{namespace}/{name}/lab"
