"""Experiment and Trial status, written by the rules of Katib's controllers.

Same condition types and reasons, same counting (a trial whose metrics never appeared counts
as failed towards maxFailedTrialCount and as completed towards maxTrialCount), same order of
checks (goal, then max failed, then max trials, then the end of the suggestions), and the
same field names with Go's `omitempty` (zero counts and empty lists are left out), so checks
and tools written against a cluster read the local objects unchanged.
"""

from __future__ import annotations

from typing import Any

from lab.kube.conditions import get_condition, is_true, now, set_condition
from lab.kube.katib import UNAVAILABLE
from lab.kube.katib import trial_objective as trial_objective

# Experiment reasons (Katib's experiment status util).
CREATED = "ExperimentCreated"
RUNNING = "ExperimentRunning"
GOAL_REACHED = "ExperimentGoalReached"
MAX_TRIALS_REACHED = "ExperimentMaxTrialsReached"
SUGGESTION_END = "ExperimentSuggestionEndReached"
FAILED = "ExperimentFailed"
RESTARTING = "ExperimentRestarting"

# Trial condition type -> (reason, message) as Katib's trial controller writes them.
TRIAL_REASONS = {
    "Created": ("TrialCreated", "Trial is created"),
    "Running": ("TrialRunning", "Trial is running"),
    "Succeeded": ("TrialSucceeded", "Trial has succeeded"),
    "Failed": ("TrialFailed", "Trial has failed"),
    "MetricsUnavailable": ("MetricsUnavailable", "Metrics are not available"),
    "Killed": ("TrialKilled", "Trial is killed"),
    "EarlyStopped": ("TrialEarlyStopped", "Trial is early stopped"),
}
TERMINAL = ("Succeeded", "Failed", "MetricsUnavailable", "Killed", "EarlyStopped")

# The condition of the trial's Job that Katib copies into the Trial's reason and message
# (v0.19.0 trial/trial_controller_util.go:54-59, 83-88, 103-108: "<reason>. Job reason: R",
# "<message>. Job message: M"), read with the default success/failure conditions
# (experiments/v1beta1/constants.go:27,30: the Job's Complete / Failed condition that is
# True, trial/util/job_util.go GetDeployedJobStatus). What writes them:
# - batch Job, Kubernetes v1.34 (k3s v1.34.2): Complete (after SuccessCriteriaMet) with
#   reason CompletionsReached, message "Reached expected number of succeeded pods"; Failed
#   with BackoffLimitExceeded, "Job has reached the specified backoff limit"
#   (pkg/controller/job/job_controller.go syncJob; batch/v1 types.go JobReason*);
# - PyTorchJob / TFJob, training-operator v1.9.2: reason <Kind>Succeeded / <Kind>Failed
#   (pkg/util/status.go:31 NewReason), success message
#   pkg/controller.v1/pytorch/pytorchjob_controller.go:391 / tensorflow/tfjob_controller.go:451.
JOB_SUCCEEDED = {"Job": ("CompletionsReached", "Reached expected number of succeeded pods"),
                 "PyTorchJob": ("PyTorchJobSucceeded", "PyTorchJob {name} is successfully "
                                                       "completed."),
                 "TFJob": ("TFJobSucceeded", "TFJob {namespace}/{name} successfully completed.")}
JOB_FAILED = {"Job": ("BackoffLimitExceeded", "Job has reached the specified backoff limit"),
              "PyTorchJob": ("PyTorchJobFailed", ""), "TFJob": ("TFJobFailed", "")}


def mark(status: dict[str, Any], ctype: str, value: bool, reason: str, message: str) -> None:
    """Katib's setCondition: unchanged (status, reason) is a no-op; a changed condition moves
    to the end of the list, so the last condition is always the newest."""
    cond = get_condition(status, ctype)
    state = "True" if value else "False"
    if cond is not None and cond.get("status") == state and cond.get("reason") == reason:
        return
    new = set_condition(status, ctype, value, reason, message)
    conds = status["conditions"]
    conds.remove(new)
    conds.append(new)


def _finish(status: dict[str, Any], ctype: str, reason: str, message: str) -> None:
    """Succeeded/Failed (and the trial's terminal types): Running flips to False first."""
    running = get_condition(status, "Running")
    if running is not None:
        mark(status, "Running", False, running.get("reason", ""), running.get("message", ""))
    mark(status, ctype, True, reason, message)
    status["completionTime"] = now()


# --- trials ------------------------------------------------------------------------------

def trial_created(trial: dict[str, Any]) -> None:
    status = trial.setdefault("status", {})
    status["startTime"] = now()
    mark(status, "Created", True, *TRIAL_REASONS["Created"])


def trial_running(trial: dict[str, Any]) -> None:
    mark(trial["status"], "Running", True, *TRIAL_REASONS["Running"])


def trial_finished(trial: dict[str, Any], ctype: str, detail: str = "",
                   job_kind: str | None = None) -> None:
    """The trial's terminal condition. With the kind of the trial's job, the reason is
    Katib's on Kubernetes v1.34 ("TrialSucceeded. Job reason: CompletionsReached"), and so
    is the message of a success; a failure's or missing metrics' message carries kflab's
    `detail` (why, in the learner's terms) where Katib copies the Job's generic line."""
    reason, message = TRIAL_REASONS[ctype]
    job = None
    if job_kind in JOB_SUCCEEDED and ctype in ("Succeeded", "MetricsUnavailable"):
        job = JOB_SUCCEEDED[job_kind]
    elif job_kind in JOB_FAILED and ctype == "Failed":
        job = JOB_FAILED[job_kind]
    if job is not None:
        meta = trial.get("metadata") or {}
        job_reason, job_message = job[0], job[1].format(name=meta.get("name", ""),
                                                        namespace=meta.get("namespace", ""))
        reason = f"{reason}. Job reason: {job_reason}"
        if ctype == "Succeeded" or not detail:
            detail = job_message
    if detail:
        message = f"{message}. Job message: {detail}"
    _finish(trial["status"], ctype, reason, message)


def trial_state(trial: dict[str, Any]) -> str:
    """Katib's precedence: Killed, Failed, Succeeded, EarlyStopped, Running,
    MetricsUnavailable, else Pending."""
    status = trial.get("status") or {}
    for ctype in ("Killed", "Failed", "Succeeded", "EarlyStopped", "Running",
                  "MetricsUnavailable"):
        if is_true(status, ctype):
            return ctype
    return "Pending"


# --- experiments -------------------------------------------------------------------------

def experiment_created(exp: dict[str, Any]) -> None:
    status = exp["status"] = {"startTime": now()}
    mark(status, "Created", True, CREATED, "Experiment is created")


def is_completed(exp: dict[str, Any]) -> bool:
    status = exp.get("status") or {}
    return is_true(status, "Succeeded") or is_true(status, "Failed")


LISTS = {"Running": ("runningTrialList", "trialsRunning"),
         "Pending": ("pendingTrialList", "trialsPending"),
         "Failed": ("failedTrialList", "trialsFailed"),
         "Succeeded": ("succeededTrialList", "trialsSucceeded"),
         "Killed": ("killedTrialList", "trialsKilled"),
         "EarlyStopped": ("earlyStoppedTrialList", "trialsEarlyStopped"),
         "MetricsUnavailable": ("metricsUnavailableTrialList", "trialMetricsUnavailable")}


def summarize(exp: dict[str, Any], trials: list[dict[str, Any]]) -> bool:
    """Recount the trial lists, pick the optimal trial; True when the goal is reached."""
    status = exp.setdefault("status", {})
    objective = exp["spec"]["objective"]
    goal = objective.get("goal")
    goal = float(goal) if goal is not None else None
    maximize = objective["type"] == "maximize"
    groups: dict[str, list[str]] = {k: [] for k in LISTS}
    best_i, best_v, reached = -1, 0.0, False
    for i, trial in enumerate(trials):
        groups[trial_state(trial)].append(trial["metadata"]["name"])
        raw = trial_objective(trial)
        if raw == UNAVAILABLE:
            continue
        try:
            value = float(raw)
        except ValueError:  # a non-numeric objective: the latest such trial is "best"
            best_i = i
            continue
        if best_i == -1 or (value > best_v if maximize else value < best_v):
            best_i, best_v = i, value
        if goal is not None and (best_v >= goal if maximize else best_v <= goal):
            reached = True
    status["trials"] = len(trials)
    for state, (list_key, count_key) in LISTS.items():
        status.pop(list_key, None)
        status.pop(count_key, None)
        if groups[state]:
            status[list_key] = groups[state]
            status[count_key] = len(groups[state])
    if not trials:
        status.pop("trials")
    optimal: dict[str, Any] = {"observation": {}}
    if best_i != -1:
        best = trials[best_i]
        optimal = {"bestTrialName": best["metadata"]["name"],
                   "parameterAssignments": list(best["spec"]["parameterAssignments"]),
                   "observation": {"metrics": list(
                       ((best.get("status") or {}).get("observation") or {})
                       .get("metrics", []))}}
    status["currentOptimalTrial"] = optimal
    return reached


def update_condition(exp: dict[str, Any], goal_reached: bool, suggestions_done: bool) -> None:
    """Katib's order: goal, max failed, max trials, end of suggestions, else running."""
    status = exp["status"]
    spec = exp["spec"]
    count = {k: status.get(v[1], 0) for k, v in LISTS.items()}
    completed = (count["Succeeded"] + count["Failed"] + count["Killed"]
                 + count["EarlyStopped"] + count["MetricsUnavailable"])
    failed = count["Failed"] + count["MetricsUnavailable"]
    active = count["Pending"] + count["Running"]
    max_failed = spec.get("maxFailedTrialCount")
    max_trials = spec.get("maxTrialCount")
    if goal_reached:
        _finish(status, "Succeeded", GOAL_REACHED,
                "Experiment has succeeded because Objective goal has reached")
    elif max_failed is not None and failed != 0 and failed >= max_failed:
        _finish(status, "Failed", FAILED,
                "Experiment has failed because max failed count has reached")
    elif max_trials is not None and completed >= max_trials:
        _finish(status, "Succeeded", MAX_TRIALS_REACHED,
                "Experiment has succeeded because max trial count has reached")
    elif suggestions_done and active == 0:
        _finish(status, "Succeeded", SUGGESTION_END,
                "Experiment has succeeded because suggestion service has reached the end")
    else:
        mark(status, "Running", True, RUNNING, "Experiment is running")


def restarting(exp: dict[str, Any]) -> None:
    """Katib's MarkExperimentStatusRestarting (pkg/apis/controller/experiments/v1beta1/
    util.go): Succeeded and Failed are removed, Restarting is set (and stays: Running does
    not remove it); the next reconcile marks Running again."""
    status = exp["status"]
    status["conditions"] = [c for c in status.get("conditions") or []
                            if c.get("type") not in ("Succeeded", "Failed")]
    mark(status, "Restarting", True, RESTARTING, "Experiment is restarted")


def interrupted(exp: dict[str, Any], why: str) -> None:
    """Ctrl-C or an error in kflab itself: the experiment ends Failed, saying why."""
    _finish(exp["status"], "Failed", FAILED, f"Experiment has failed because {why}")


def last_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    conds = (obj.get("status") or {}).get("conditions") or []
    return conds[-1] if conds else None
