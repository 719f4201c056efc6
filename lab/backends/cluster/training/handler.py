"""PyTorchJobs on a cluster: the Training Operator makes the replica pods and their status.

Every replica's `pytorch` container gets the work folder and kflab's pod runner, which also
sends back the files the replica wrote; when the job ends they are written into the work
folder (Master last, so rank 0's files win), as the local backend's shared folder would hold
them. That needs the pods' logs: with cleanPodPolicy All the pods are gone, and kflab says so.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.backends.cluster.workload import inject
from lab.errors import InputError, LabError

JOB_TIMEOUT = 3600.0
CONTAINER = "pytorch"  # the Training Operator's required container name
JOB_LABEL = "training.kubeflow.org/job-name"
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"
REPLICA = re.compile(r"^(master|worker)-(\d+)$")


def prepare(obj: dict[str, Any], base_dir: Path, wheelhouse: str | None = None
            ) -> tuple[dict[str, Any], str, Any]:
    """The job to apply (every replica's `pytorch` container given the work folder, the
    runner, and outputs sent back), with its files' ConfigMap name and files."""
    obj = copy.deepcopy(obj)
    replicas = common.deep(obj, "spec", "pytorchReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        raise InputError(None, "spec.pytorchReplicaSpecs", "missing",
                         hint="give a Master (and optional Worker) replica spec")
    cm_name, files = common.files_for("PyTorchJob", obj["metadata"]["name"], base_dir)
    for rtype, rep in replicas.items():
        pod = common.deep(rep, "template", "spec")
        where = f"spec.pytorchReplicaSpecs.{rtype}.template.spec"
        if not isinstance(pod, dict):
            raise InputError(None, where, "missing", hint="give the replica a pod template")
        inject(pod, cm_name, files, where=where, containers=[CONTAINER], outputs=True,
               wheelhouse=wheelhouse)
    return obj, cm_name, files


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    obj, cm_name, files = prepare(obj, base_dir, backend.wheelhouse)
    name, ns = obj["metadata"]["name"], obj["metadata"]["namespace"]
    common.ship_files(backend, "PyTorchJob", name, ns, cm_name, files)
    out = common.apply_object(backend, obj, replace_changed=True)
    common.own(backend, cm_name, out)
    if not wait or backend.dry_run:
        return out
    out = common.wait(backend, out,
                      lambda o: common.conditions_true(o, "Succeeded", "Failed") is not None,
                      timeout=JOB_TIMEOUT, describe="succeed or fail")
    written = collect_outputs(backend, name, ns, base_dir)
    if written:
        backend.say(f"wrote back from the pods: {', '.join(written)}")
    return out


def collect_outputs(backend: Any, name: str, namespace: str, base_dir: Path) -> list[str]:
    """Files the replicas wrote, from their logs into `base_dir` (workers first, Master last)."""
    from lab.backends.cluster.outputs import collect
    from lab.kube.logs import pod_logs, pods

    selector = f"{JOB_LABEL}={name}"
    found = pods(backend.kube, namespace, selector)
    if not found:
        backend.say(f"PyTorchJob {name}: no pods left to read outputs from "
                    "(cleanPodPolicy All deletes them)")
        return []
    ordered = sorted(found, key=lambda p: (
        (p["metadata"].get("labels") or {}).get(TYPE_LABEL, "").lower() == "master",
        p["metadata"]["name"]))
    written: list[str] = []
    for pod in ordered:
        pod_name = pod["metadata"]["name"]
        lines = (line for _, line in pod_logs(
            backend.kube, namespace, f"{selector},{_name_label(pod)}", container=CONTAINER))
        try:
            written += [w for w in collect(lines, base_dir) if w not in written]
        except LabError as exc:
            backend.say(f"pod {pod_name}: {exc}")
    return written


def _name_label(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    return f"{TYPE_LABEL}={labels.get(TYPE_LABEL, '')},{INDEX_LABEL}={labels.get(INDEX_LABEL, '')}"


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    return common.delete_with_files(backend, kind, name, namespace)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    """One replica's log (`master-0`, `worker-1`), or every replica's."""
    selector = f"{JOB_LABEL}={name}"
    if replica:
        m = REPLICA.match(replica.lower())
        if not m:
            raise LabError(f"unknown replica {replica!r}", hint="e.g. master-0 or worker-1")
        selector += f",{TYPE_LABEL}={m.group(1)},{INDEX_LABEL}={m.group(2)}"
    return common.pod_lines(backend, namespace, selector, container=CONTAINER, **opts)
