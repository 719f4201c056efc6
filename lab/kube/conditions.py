"""Kubernetes-style status conditions, as the upstream controllers write them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def now() -> str:
    """RFC 3339 timestamp in UTC, second precision, as Kubernetes writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get_condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(status: dict[str, Any], ctype: str) -> bool:
    cond = get_condition(status, ctype)
    return bool(cond and cond.get("status") == "True")


def set_condition(
    status: dict[str, Any],
    ctype: str,
    value: bool | str,
    reason: str = "",
    message: str = "",
    *,
    with_update_time: bool = True,
) -> dict[str, Any]:
    """Set one condition; the transition time moves only when the status value changes."""
    state = value if isinstance(value, str) else ("True" if value else "False")
    conds: list[dict[str, Any]] = status.setdefault("conditions", [])
    stamp = now()
    cond = get_condition(status, ctype)
    if cond is None:
        cond = {"type": ctype}
        conds.append(cond)
        cond["lastTransitionTime"] = stamp
    elif cond.get("status") != state:
        cond["lastTransitionTime"] = stamp
    cond["status"] = state
    if with_update_time:
        cond["lastUpdateTime"] = stamp
    cond["reason"] = reason
    cond["message"] = message
    return cond


# States `kflab apply` exits 1 for. RolloutFailed: KServe's modelStatus says the new
# version is blocked by a failed load while the previous one keeps serving (Ready True).
FAILED_STATES = ("FAILED", "Failed", "RolloutFailed")


# Ready False reasons that are failures, not a start in progress: the Deployment's
# (ProgressDeadlineExceeded, FailedCreate of ReplicaFailure) and KServe's own.
FAILED_REASONS = ("ProgressDeadlineExceeded", "FailedCreate", "ModelLoadFailed",
                  "InvalidSpec", "RuntimeNotRecognized", "NoSupportingRuntime",
                  "InvalidPredictorSpec")


def _blocked(status: dict[str, Any]) -> bool:
    return (status.get("modelStatus") or {}).get("transitionStatus") == "BlockedByFailedLoad"


def summary_state(obj: dict[str, Any]) -> str:
    """One word for a resource's state, as the CLI prints it: the status `state`, else a
    Ready condition (KServe style), else the latest condition type."""
    status = obj.get("status") or {}
    if "state" in status:
        return str(status["state"])
    conds = status.get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    if ready is not None:  # KServe-style readiness
        if ready.get("status") == "True" and _blocked(status):
            return "RolloutFailed"
        if ready.get("status") == "True":
            return "Ready"
        # KServe v0.16 raw deployment writes Ready False (not Unknown) while the predictor
        # Deployment is not yet Available (the image pulls, the model loads): Failed only
        # when something did fail -- a model that failed to load, a stuck rollout.
        failed = _blocked(status) or ready.get("reason") in FAILED_REASONS
        return "Failed" if ready.get("status") == "False" and failed else "Pending"
    return str(conds[-1]["type"]) if conds else "created"


def ready_message(obj: dict[str, Any]) -> str:
    """`reason: message` of the Ready condition (empty when there is none); for a failed
    rollout, the failure of the new version and that the previous one still serves."""
    status = obj.get("status") or {}
    conds = status.get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), {})
    if ready.get("status") == "True" and _blocked(status):
        info = status["modelStatus"].get("lastFailureInfo") or {}
        return (f"{info.get('reason', '')}: {info.get('message', '')} (the previous version "
                "still serves)").strip(": ")
    return f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")

