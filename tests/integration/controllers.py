"""The tests play the controllers that cannot run here (Katib, KServe, the garbage collector).

Each helper writes what the upstream controller writes, the way it writes it: controller-
runtime's `r.Status().Update(ctx, obj)` is a PUT of the status subresource carrying the
object's resourceVersion (so a stale write is a 409), which never touches spec or generation.
"""

from __future__ import annotations

import copy
from typing import Any

from lab.kube.conditions import now
from lab.kube.objects import Ref

# Katib's experiment controller (pkg/controller.v1beta1/experiment/util/status_util.go):
# condition type -> (reason, message) as it marks an Experiment's progress.
KATIB_EXPERIMENT = {
    "Created": ("ExperimentCreated", "Experiment is created"),
    "Running": ("ExperimentRunning", "Experiment is running"),
    "Succeeded": ("ExperimentMaxTrialsReached", "Experiment has succeeded because max trial "
                  "count has reached"),
    "Failed": ("ExperimentFailed", "Experiment has failed because max failed count has "
               "reached"),
}


def update_status(kube: Any, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """PUT `status` to obj's status subresource with obj's resourceVersion (Status().Update)."""
    ref = Ref.of(obj)
    res = kube.resource(ref.api_version, ref.kind)
    body = copy.deepcopy(obj)
    body["status"] = status
    out = kube.dynamic.replace(res.status, body=body, name=ref.name, namespace=ref.namespace)
    return out.to_dict()


def _set(conds: list[dict[str, Any]], ctype: str, state: str, reason: str,
         message: str) -> list[dict[str, Any]]:
    """Katib's setCondition: an unchanged (status, reason) is left alone; a changed condition
    is removed and appended, so the last condition is always the newest."""
    cur = next((c for c in conds if c["type"] == ctype), None)
    if cur is not None and cur["status"] == state and cur.get("reason") == reason:
        return conds
    stamp = now()
    new = {"type": ctype, "status": state, "reason": reason, "message": message,
           "lastUpdateTime": stamp,
           "lastTransitionTime": cur["lastTransitionTime"]
           if cur is not None and cur["status"] == state else stamp}
    return [c for c in conds if c["type"] != ctype] + [new]


def katib_condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    """Katib's MarkExperimentStatus<ctype>: on Succeeded/Failed the Running condition turns
    False first (keeping its reason), then the end condition is set True."""
    reason, message = KATIB_EXPERIMENT[ctype]
    conds = list(status.get("conditions") or [])
    if ctype in ("Succeeded", "Failed"):
        running = next((c for c in conds if c["type"] == "Running"), None)
        if running is not None:
            conds = _set(conds, "Running", "False", running.get("reason", ""),
                         running.get("message", ""))
    conds = _set(conds, ctype, "True", reason, message)
    out = dict(status, conditions=conds)
    out.setdefault("startTime", now())
    if ctype in ("Succeeded", "Failed"):
        out["completionTime"] = now()
    return out


def katib_step(kube: Any, ref: Ref, ctype: str, **fields: Any) -> dict[str, Any]:
    """Read the Experiment, mark `ctype` as Katib's controller does, write the status back."""
    from lab.kube.objects import get

    obj = get(kube, ref)
    assert obj is not None
    status = katib_condition(dict(obj.get("status") or {}), ctype)
    status.update(fields)
    return update_status(kube, obj, status)


def collect_garbage(kube: Any, ref: Ref) -> dict[str, Any] | None:
    """kube-controller-manager's garbage collector, for an object being deleted in the
    Foreground with no dependents left: it removes the `foregroundDeletion` finalizer, and
    the API server then deletes the object. Returns what the server answered."""
    from lab.kube.objects import get

    obj = get(kube, ref, missing_ok=True)
    if obj is None:
        return None
    finalizers = [f for f in obj["metadata"].get("finalizers") or []
                  if f != "foregroundDeletion"]
    res = kube.resource(ref.api_version, ref.kind)
    patch = {"metadata": {"finalizers": finalizers or None,
                          "resourceVersion": obj["metadata"]["resourceVersion"]}}
    out = kube.dynamic.patch(res, body=patch, name=ref.name, namespace=ref.namespace,
                             content_type="application/merge-patch+json")
    return out.to_dict() if out is not None else None
