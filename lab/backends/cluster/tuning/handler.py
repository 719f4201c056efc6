"""Katib Experiments and Trials on a cluster: Katib's controllers run them.

The trial template's pod (a batch Job, or each replica of a PyTorchJob) gets the work folder
and kflab's pod runner; Katib substitutes the trial parameters into it, injects its metrics
collector (the lab namespace carries the injection label) and writes every status field.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.cluster import common
from lab.backends.cluster.workload import inject
from lab.errors import InputError

EXPERIMENT_TIMEOUT = 3600.0
FINAL = ("Succeeded", "Failed")


def _pod_templates(run_spec: Any, where: str) -> list[tuple[dict[str, Any], str]]:
    """(pod spec, manifest path) of every pod a trial's run spec makes."""
    if not isinstance(run_spec, dict):
        return []
    kind = run_spec.get("kind")
    if kind == "Job":
        pod = common.deep(run_spec, "spec", "template", "spec")
        return [(pod, f"{where}.spec.template.spec")] if isinstance(pod, dict) else []
    if kind == "PyTorchJob":
        out = []
        for rtype, rep in (common.deep(run_spec, "spec", "pytorchReplicaSpecs") or {}).items():
            pod = common.deep(rep, "template", "spec")
            if isinstance(pod, dict):
                out.append((pod, f"{where}.spec.pytorchReplicaSpecs.{rtype}.template.spec"))
        return out
    raise InputError(None, f"{where}.kind", f"kflab cannot ship files into a {kind} trial",
                     hint="use a batch/v1 Job or a PyTorchJob as the trial template")


def prepare(obj: dict[str, Any], base_dir: Path, wheelhouse: str | None = None
            ) -> tuple[dict[str, Any], str | None, Any]:
    """The object to apply (trial pods given the work folder and the runner), the files'
    ConfigMap name and files (None when the trial template has no pods kflab knows)."""
    obj = copy.deepcopy(obj)
    kind, name = obj["kind"], obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    if kind == "Experiment":
        template = spec.get("trialTemplate") or {}
        run_spec, where = template.get("trialSpec"), "spec.trialTemplate.trialSpec"
        primary = template.get("primaryContainerName")
    else:
        run_spec, where = spec.get("runSpec"), "spec.runSpec"
        primary = spec.get("primaryContainerName")
    pods = _pod_templates(run_spec, where)
    if not pods:
        return obj, None, None
    cm_name, files = common.files_for(kind, name, base_dir)
    for pod, at in pods:
        names = [primary] if primary and any(c.get("name") == primary for c in
                                             pod.get("containers") or []) else None
        inject(pod, cm_name, files, where=at, containers=names, wheelhouse=wheelhouse)
        for c in pod.get("containers") or []:
            if names is None or c.get("name") in names:
                _survive_the_webhook(c)
    return obj, cm_name, files


def _survive_the_webhook(container: dict[str, Any]) -> None:
    """Give the container its command as `sh -c '<one quoted line>'`.

    Katib's pod webhook (v0.19.0 pkg/webhook/v1beta1/pod/utils.go, wrapWorkerContainer)
    joins the primary container's command and args with spaces, unquoted, keeps a leading
    `sh -c` only when it is the first two words, and appends its output redirect. kflab's
    runner comes first, so a learner's `[sh, -c, "python3 train.py ..."]` would reach the
    runner as `sh -c python3 train.py ...` (a bare python3, no metric). Quoting every word
    ourselves and starting with `sh -c` makes the join a no-op on our words. Katib's
    `${trialParameters.*}` placeholders stay inside the quotes and are substituted there."""
    words = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    container["command"] = ["sh", "-c", shlex.join(words)]
    container.pop("args", None)


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True) -> dict:
    obj, cm_name, files = prepare(obj, base_dir, backend.wheelhouse)
    meta = obj["metadata"]
    if cm_name:
        common.ship_files(backend, obj["kind"], meta["name"], meta["namespace"], cm_name,
                          files)
    out = common.apply_object(backend, obj, replace_changed=True)
    if cm_name:
        common.own(backend, cm_name, out)
    if not wait:
        return out
    return common.wait(backend, out, lambda o: common.conditions_true(o, *FINAL) is not None,
                       timeout=EXPERIMENT_TIMEOUT, describe="succeed or fail")


def delete(backend: Any, kind: str, name: str, namespace: str) -> bool:
    return common.delete_with_files(backend, kind, name, namespace)


def logs(backend: Any, kind: str, name: str, namespace: str,
         replica: str | None, **opts: Any) -> Iterator[str]:
    """A Trial's pod logs; for an Experiment, every trial pod's (each line says which)."""
    from lab.kube.logs import selector_for

    return common.pod_lines(backend, namespace, selector_for(kind, name), **opts)
