"""PyTorchJobs and TFJobs on a cluster: the Training Operator makes the replica pods and
their status.

Every replica's job container (`pytorch`, `tensorflow`) gets the work folder and kflab's pod
runner, which also sends back the files the replica wrote; when the job ends they are written
into the work folder (the Master or Chief last, so its files win), as the local backend's
shared folder would hold them. That needs the pods' logs: with cleanPodPolicy All the pods
are gone, and kflab says so.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.backends.cluster.workload import inject
from lab.errors import InputError, LabError

JOB_TIMEOUT = 3600.0
JOB_LABEL = "training.kubeflow.org/job-name"
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"


@dataclass(frozen=True)
class JobKind:
    specs_key: str
    container: str  # the container the Training Operator requires and configures
    replica: re.Pattern[str]  # `kflab logs --replica` names: type-index
    leaders: tuple[str, ...]  # replica types whose files are written back last
    example: str


KINDS = {
    "PyTorchJob": JobKind("pytorchReplicaSpecs", "pytorch",
                          re.compile(r"^(master|worker)-(\d+)$"), ("master",),
                          "e.g. master-0 or worker-1"),
    "TFJob": JobKind("tfReplicaSpecs", "tensorflow",
                     re.compile(r"^(chief|master|worker|ps|evaluator)-(\d+)$"),
                     ("chief", "master"), "e.g. chief-0, worker-1 or ps-0"),
}


def prepare(obj: dict[str, Any], base_dir: Path, wheelhouse: str | None = None
            ) -> tuple[dict[str, Any], str, Any]:
    """The job to apply (every replica's job container given the work folder, the runner,
    and outputs sent back), with its files' ConfigMap name and files."""
    obj = copy.deepcopy(obj)
    kind = str(obj.get("kind"))
    jk = KINDS[kind]
    replicas = common.deep(obj, "spec", jk.specs_key)
    if not isinstance(replicas, dict) or not replicas:
        raise InputError(None, f"spec.{jk.specs_key}", "missing",
                         hint="give the job its replica specs (e.g. a Master or Chief and "
                              "Workers)")
    cm_name, files = common.files_for(kind, obj["metadata"]["name"], base_dir)
    for rtype, rep in replicas.items():
        pod = common.deep(rep, "template", "spec")
        where = f"spec.{jk.specs_key}.{rtype}.template.spec"
        if not isinstance(pod, dict):
            raise InputError(None, where, "missing", hint="give the replica a pod template")
        inject(pod, cm_name, files, where=where, containers=[jk.container], outputs=True,
               wheelhouse=wheelhouse)
    return obj, cm_name, files


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    kind = str(obj.get("kind"))
    obj, cm_name, files = prepare(obj, base_dir, backend.wheelhouse)
    name, ns = obj["metadata"]["name"], obj["metadata"]["namespace"]
    common.ship_files(backend, kind, name, ns, cm_name, files)
    out = common.apply_object(backend, obj, replace_changed=True)
    common.own(backend, cm_name, out)
    if not wait or backend.dry_run:
        return out
    out = common.wait(backend, out,
                      lambda o: common.conditions_true(o, "Succeeded", "Failed") is not None,
                      timeout=JOB_TIMEOUT, describe="succeed or fail")
    written = collect_outputs(backend, name, ns, base_dir, kind)
    if written:
        backend.say(f"wrote back from the pods: {', '.join(written)}")
    return out


def collect_outputs(backend: Any, name: str, namespace: str, base_dir: Path,
                    kind: str = "PyTorchJob") -> list[str]:
    """Files the replicas wrote, from their logs into `base_dir` (workers first, the Master
    or Chief last)."""
    from lab.backends.cluster.outputs import collect
    from lab.kube.logs import pod_logs, pods

    selector = f"{JOB_LABEL}={name}"
    found = pods(backend.kube, namespace, selector)
    if not found:
        backend.say(f"{kind} {name}: no pods left to read outputs from "
                    "(cleanPodPolicy All deletes them)")
        return []
    jk = KINDS[kind]
    ordered = sorted(found, key=lambda p: (
        (p["metadata"].get("labels") or {}).get(TYPE_LABEL, "").lower() in jk.leaders,
        p["metadata"]["name"]))
    written: list[str] = []
    for pod in ordered:
        pod_name = pod["metadata"]["name"]
        lines = (line for _, line in pod_logs(
            backend.kube, namespace, f"{selector},{_name_label(pod)}", container=jk.container))
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
    """One replica's log (`master-0`, `worker-1`, `chief-0`), or every replica's."""
    jk = KINDS[kind]
    selector = f"{JOB_LABEL}={name}"
    if replica:
        m = jk.replica.match(replica.lower())
        if not m:
            raise LabError(f"unknown replica {replica!r}", hint=jk.example)
        selector += f",{TYPE_LABEL}={m.group(1)},{INDEX_LABEL}={m.group(2)}"
    return common.pod_lines(backend, namespace, selector, container=jk.container, **opts)
