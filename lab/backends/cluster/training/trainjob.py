"""TrainJobs on a cluster: Kubeflow Trainer makes the JobSet, its Jobs and the nodes' pods,
and writes the status (conditions Complete/Failed, jobsStatus); kflab only reads it.

A TrainJob has no pod template: the work folder and kflab's pod runner reach the `node`
container through `spec.podTemplateOverrides` (volumes and mounts for the `node` Job) and
`spec.trainer.command` (the runner, then the learner's command), the fields Trainer v2.1
merges into the JobSet it builds. Files the nodes write come back from their logs, node 0
last (its files win).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.backends.cluster.workload import inject
from lab.errors import InputError, LabError
from lab.kube.trainer import refuse_newer_fields

JOB_TIMEOUT = 3600.0
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"  # JobSet labels every pod with its name
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # Indexed Job: the node's rank
CONTAINER = "node"  # constants.Node: the trainer container of the torch runtime


def prepare(obj: dict[str, Any], base_dir: Path, wheelhouse: str | None = None
            ) -> tuple[dict[str, Any], str, Any]:
    obj = copy.deepcopy(obj)
    refuse_newer_fields(obj.get("spec"), lambda field, msg, hint: InputError(
        None, field, msg, hint=hint))
    trainer = common.deep(obj, "spec", "trainer")
    if not isinstance(trainer, dict):
        raise InputError(None, "spec.trainer", "missing",
                         hint='give the trainer a command: trainer: {command: ["torchrun", '
                              '"train.py"]}')
    cm_name, files = common.files_for("TrainJob", obj["metadata"]["name"], base_dir)
    pod: dict[str, Any] = {"containers": [{"name": CONTAINER,
                                           "command": trainer.get("command"),
                                           "env": list(trainer.get("env") or [])}]}
    inject(pod, cm_name, files, where="spec.trainer", containers=[CONTAINER], outputs=True,
           wheelhouse=wheelhouse)
    node = pod["containers"][0]
    trainer["command"] = node["command"]
    override = {"targetJobs": [{"name": CONTAINER}],
                "spec": {"volumes": pod["volumes"],
                         "containers": [{"name": CONTAINER,
                                         "volumeMounts": node["volumeMounts"]}]}}
    added = [e for e in node["env"] if e not in (trainer.get("env") or [])]
    if added:
        trainer["env"] = list(trainer.get("env") or []) + added
    spec = obj["spec"]
    spec["podTemplateOverrides"] = [*(spec.get("podTemplateOverrides") or []), override]
    return obj, cm_name, files


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    obj, cm_name, files = prepare(obj, base_dir, backend.wheelhouse)
    name, ns = obj["metadata"]["name"], obj["metadata"]["namespace"]
    common.ship_files(backend, "TrainJob", name, ns, cm_name, files)
    out = common.apply_object(backend, obj, replace_changed=True)
    common.own(backend, cm_name, out)
    if not wait or backend.dry_run:
        return out
    out = common.wait(backend, out,
                      lambda o: common.conditions_true(o, "Complete", "Failed") is not None,
                      timeout=JOB_TIMEOUT, describe="complete or fail")
    written = collect_outputs(backend, name, ns, base_dir)
    if written:
        backend.say(f"wrote back from the pods: {', '.join(written)}")
    return out


def collect_outputs(backend: Any, name: str, namespace: str, base_dir: Path) -> list[str]:
    from lab.backends.cluster.outputs import collect
    from lab.kube.logs import pod_logs, pods

    selector = f"{JOBSET_LABEL}={name},{RJOB_LABEL}=node"
    found = pods(backend.kube, namespace, selector)
    ordered = sorted(found, key=lambda p: -int(
        (p["metadata"].get("labels") or {}).get(INDEX_LABEL, "0") or 0))
    written: list[str] = []
    for pod in ordered:
        index = (pod["metadata"].get("labels") or {}).get(INDEX_LABEL, "")
        lines = (line for _, line in pod_logs(backend.kube, namespace,
                                              f"{selector},{INDEX_LABEL}={index}",
                                              container=CONTAINER))
        try:
            written += [w for w in collect(lines, base_dir) if w not in written]
        except LabError as exc:
            backend.say(f"pod {pod['metadata']['name']}: {exc}")
    return written


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    return common.delete_with_files(backend, kind, name, namespace)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    """One node's log (`node-1`: the pod with completion index 1), or every node's."""
    selector = f"{JOBSET_LABEL}={name},{RJOB_LABEL}=node"
    if replica:
        head, _, index = replica.lower().partition("-")
        if head != "node" or not index.isdigit():
            raise LabError(f"unknown node {replica!r}", hint="e.g. node-0 or node-1")
        selector += f",{INDEX_LABEL}={int(index)}"
    return common.pod_lines(backend, namespace, selector, container=CONTAINER, **opts)


def nodes(backend: Any, name: str, namespace: str) -> list[dict[str, Any]]:
    """The TrainJob's node pods as JobSet made them (`kflab ui`'s job page): the pod, its
    completion index (the node's rank), phase and restarts, lowest rank first."""
    from lab.kube.logs import pods

    found = pods(backend.kube, namespace, f"{JOBSET_LABEL}={name},{RJOB_LABEL}=node")
    out = []
    for pod in found:
        index = (pod["metadata"].get("labels") or {}).get(INDEX_LABEL, "")
        status = pod.get("status") or {}
        restarts = sum(int(c.get("restartCount") or 0)
                       for c in status.get("containerStatuses") or [])
        out.append({"pod": pod["metadata"]["name"],
                    "index": int(index) if str(index).isdigit() else -1,
                    "phase": status.get("phase") or "Pending", "restarts": restarts})
    return sorted(out, key=lambda n: (n["index"], n["pod"]))
