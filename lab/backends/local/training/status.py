"""Training job status in the Training Operator's shape (kubeflow.org/v1 JobStatus).

Conditions follow the operator's rules (pkg/util/status.go): a new condition goes last;
Running and Restarting replace each other; Succeeded or Failed turn Running to False.
Reasons are `<Kind><Type>` (PyTorchJobRunning, TFJobSucceeded); replicaStatuses omit zero
counts as the Go struct does. Shared by every job kind.
"""

from __future__ import annotations

from typing import Any

from lab.kube.conditions import get_condition, now, set_condition

KIND = "PyTorchJob"
TERMINAL = ("Succeeded", "Failed")


def reason(ctype: str, kind: str = KIND) -> str:
    return f"{kind}{ctype}"


def update(status: dict[str, Any], ctype: str, message: str, kind: str = KIND) -> None:
    """Record that the job entered `ctype` (True), as the operator's UpdateJobConditions."""
    old = get_condition(status, ctype)
    if old is not None and old.get("status") == "True" and old.get("message") == message:
        return
    conds = status.setdefault("conditions", [])
    rivals = {"Running": "Restarting", "Restarting": "Running"}
    keep = []
    for cond in conds:
        if cond["type"] in (ctype, rivals.get(ctype)):
            continue
        if ctype in TERMINAL and cond["type"] == "Running" and cond["status"] != "False":
            cond["status"] = "False"
            cond["lastTransitionTime"] = cond["lastUpdateTime"] = now()
        keep.append(cond)
    status["conditions"] = keep
    cond = set_condition(status, ctype, True, reason(ctype, kind), message)
    if old is not None and old.get("status") == "True":
        cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])


def finished(status: dict[str, Any]) -> str | None:
    """Succeeded or Failed once the job has ended (a TrainJob's Complete reads as
    Succeeded), else None."""
    for ctype, same in (("Succeeded", "Succeeded"), ("Complete", "Succeeded"),
                        ("Failed", "Failed")):
        cond = get_condition(status, ctype)
        if cond and cond.get("status") == "True":
            return same
    return None


def finish(status: dict[str, Any], ctype: str, message: str, kind: str = KIND) -> None:
    if status.get("completionTime") is None:
        status["completionTime"] = now()
    update(status, ctype, message, kind)


def selector(job_name: str, rtype: str, operator: str = "pytorchjob-controller") -> str:
    return (f"training.kubeflow.org/job-name={job_name},"
            f"training.kubeflow.org/operator-name={operator},"
            f"training.kubeflow.org/replica-type={rtype.lower()}")


def replica_statuses(job_name: str, counts: dict[str, dict[str, int]],
                     operator: str = "pytorchjob-controller") -> dict[str, Any]:
    """{Master: {active: 1, selector: ...}, Worker: {succeeded: 2, ...}} without zero counts."""
    out: dict[str, Any] = {}
    for rtype, c in counts.items():
        entry: dict[str, Any] = {k: v for k, v in c.items() if v}
        entry["selector"] = selector(job_name, rtype, operator)
        out[rtype] = entry
    return out
