"""Katib Experiment and Trial handler of the local backend: what `kflab apply`, `delete`,
`logs` and the next command after a dead owner do with the Experiment object.

`apply` refuses what could never run (the spec, a GPU count the machine lacks, a collector
folder kflab cannot make, an image without its engine), writes the defaults Katib's mutating
webhook writes, and runs the experiment in the foreground (controller.py, Katib's experiment
controller). Katib's resume of a completed Experiment (`restartable`, `restart`) keeps its
trials; deleting an Experiment deletes its Trials; `abandon` marks a run whose owner died.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lab.backends.local import gpus
from lab.backends.local.containers import images
from lab.backends.local.owners import Lease
from lab.backends.local.procs import iter_log
from lab.backends.local.tuning import search as tuning_search
from lab.backends.local.tuning import spec as tuning_spec
from lab.backends.local.tuning import status as tuning_status
from lab.backends.local.tuning.containers import policies, trial_engine
from lab.backends.local.tuning.controller import ExperimentRun
from lab.backends.local.tuning.spec import Spec
from lab.backends.local.tuning.trials import EXPERIMENT_LABEL
from lab.errors import InputError, LabError

# Applying the same Experiment again changes nothing (kubectl: unchanged): no re-run.
UNCHANGED_IS_NOOP = True


def _defaults(obj: dict[str, Any], spec: Spec) -> None:
    """Fill the spec the way Katib's mutating webhook does, so the stored object matches."""
    s = obj["spec"]
    if s.get("parallelTrialCount") is None:  # absent or null: Katib's default
        s["parallelTrialCount"] = spec.parallel
    s["objective"]["metricStrategies"] = [{"name": n, "value": v}
                                          for n, v in spec.objective.strategies.items()]
    mc = s.setdefault("metricsCollectorSpec", {})
    mc.setdefault("collector", {}).setdefault("kind", spec.collector.kind)
    if spec.collector.kind == "TensorFlowEvent":  # experiment_defaults.go, as the webhook
        if not isinstance(mc.get("source"), dict):
            mc["source"] = {}
        if not isinstance(mc["source"].get("fileSystemPath"), dict):
            mc["source"]["fileSystemPath"] = {}
        fsp = mc["source"]["fileSystemPath"]
        fsp.setdefault("kind", "Directory")
        if not fsp.get("path"):
            fsp["path"] = spec.collector.path
    s.setdefault("resumePolicy", "Never")  # experiment_defaults.go setDefaultResumePolicy


def _runnable(obj: dict[str, Any]) -> Spec:
    """The Experiment's spec, or the error that stops it before anything runs."""
    if obj.get("kind") == "Trial":
        raise LabError("a Trial is created by its Experiment, not applied on its own",
                       hint="apply the Experiment (kind: Experiment) instead")
    spec = tuning_spec.parse(obj)
    if (engine := trial_engine(spec)) is not None:
        for where, image, policy in policies(spec):
            images.preflight(engine, image, policy, where=where)
    if spec.gpus and spec.gpus > len(have := gpus.inventory()):
        where = ".".join(str(k) for k in ("spec.trialTemplate.trialSpec", *spec.container_path))
        raise InputError(f"experiment '{spec.name}'", f"{where}.resources.limits.nvidia.com/gpu",
                         f"each trial asks for {spec.gpus} GPU(s) but "
                         f"{gpus.shortage(spec.gpus, len(have))}: no trial could ever start",
                         hint="lower the limit (`kflab doctor` lists the GPUs)")
    if spec.max_trials is None and spec.algorithm != "grid" and spec.objective.goal is None:
        raise InputError(f"experiment '{spec.name}'", "spec.maxTrialCount",
                         f"missing; {spec.algorithm} never runs out of suggestions, so this "
                         "would run forever", hint="set spec.maxTrialCount (or an objective goal)")
    return spec


def validate(backend: Any, obj: dict[str, Any], *, base_dir: Path) -> None:
    """Everything `apply` refuses, with no side effect."""
    spec = _runnable(obj)
    _metrics_folder(spec, base_dir)


def _metrics_folder(spec: Spec, base_dir: Path) -> None:
    """Refuse before the first trial an absolute File (or TensorFlowEvent) collector path
    whose folder kflab cannot make: Katib mounts an empty folder there in each trial pod,
    which locally means kflab makes the folder (then mounts a trial's own over it), and a
    folder such as /katib can be made only as root. Without this every trial would fail the
    same way until maxFailedTrialCount."""
    coll = spec.collector
    if coll.kind not in ("File", "TensorFlowEvent") or not coll.path or \
            not os.path.isabs(str(coll.path)):
        return
    folder = Path(str(coll.path)) if coll.kind == "TensorFlowEvent" \
        else Path(str(coll.path)).parent
    above = folder
    while not above.exists() and above != above.parent:
        above = above.parent
    if above == folder or os.access(above, os.W_OK | os.X_OK):
        return
    who = "root" if os.geteuid() == 0 else f"user {_user()}"
    raise InputError(
        f"experiment '{spec.name}'", "spec.metricsCollectorSpec.source.fileSystemPath.path",
        f"{folder} does not exist and cannot be made here ({above} is not writable by "
        f"{who}): Katib mounts an empty folder there in each trial pod, which kflab makes "
        "locally, and a folder at the top of the file system needs root; no trial would "
        "run", hint=f"make it once (sudo mkdir -p {folder} && sudo chown $USER {folder}), "
        "or point the path, and the path the trial writes, into the manifest's folder")


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def apply(backend: Any, obj: dict[str, Any], *, base_dir: Path, wait: bool = True,
          lease: Lease) -> dict:
    """Run an Experiment to completion in the foreground (`wait` is always honoured as
    True: trials are children of this process)."""
    spec = _runnable(obj)
    _metrics_folder(spec, base_dir)
    exp = copy.deepcopy(obj)
    exp.pop("status", None)
    _defaults(exp, spec)
    tuning_status.experiment_created(exp)
    return ExperimentRun(backend, exp, spec, base_dir, lease).run()


RESUME_POLICIES = ("LongRunning", "FromVolume")


EDITABLE = ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount")


def restartable(backend: Any, old: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Katib's resume: an Experiment that Succeeded by reaching maxTrialCount, with
    resumePolicy LongRunning or FromVolume, whose only change is in parallelTrialCount,
    maxTrialCount or maxFailedTrialCount, restarts and keeps its trials
    (pkg/controller.v1beta1/experiment/experiment_controller.go `Reconcile`,
    util/status_util.go `IsCompletedExperimentRestartable`; the webhook's
    validator.go `ValidateExperiment` lets only those three fields change). A new
    maxTrialCount not above the trials it has is refused, as the webhook refuses it. Any
    other change replaces the Experiment (kflab's re-apply). Algorithms kept in a service
    of their own (hyperband) are not resumed here."""
    if obj.get("kind") != "Experiment" or old.get("kind") != "Experiment":
        return False
    spec = old.get("spec") or {}
    cond = tuning_status.last_condition(old) or {}
    if spec.get("resumePolicy") not in RESUME_POLICIES or cond.get("type") != "Succeeded" \
            or cond.get("reason") != tuning_status.MAX_TRIALS_REACHED \
            or (spec.get("algorithm") or {}).get("algorithmName") in tuning_search.SERVICES:
        return False
    new = copy.deepcopy(obj)
    _defaults(new, tuning_spec.parse(obj))
    if {k: v for k, v in new["spec"].items() if k not in EDITABLE} != \
            {k: v for k, v in spec.items() if k not in EDITABLE}:
        return False
    if new["spec"] == spec:
        return False
    have = int((old.get("status") or {}).get("trials") or 0)
    wanted = new["spec"].get("maxTrialCount")
    if wanted is not None and int(wanted) <= have:
        raise InputError(f"experiment '{old['metadata']['name']}'", "spec.maxTrialCount",
                         f"{wanted} must be greater than status.trials count ({have}): Katib "
                         "restarts a completed Experiment only for more trials",
                         hint=f"set maxTrialCount above {have}, or delete the Experiment "
                              "to start it afresh")
    return True


def restart(backend: Any, old: dict[str, Any], obj: dict[str, Any], *, base_dir: Path,
            lease: Lease) -> dict:
    """Go on from the trials the Experiment has, with its new budget (see restartable)."""
    spec = _runnable(obj)
    exp = copy.deepcopy(old)
    new = copy.deepcopy(obj)
    _defaults(new, spec)
    for key in EDITABLE:
        if key in new["spec"]:
            exp["spec"][key] = new["spec"][key]
        else:
            exp["spec"].pop(key, None)
    tuning_status.restarting(exp)
    backend.emit({"event": "message", "text": (
        f"experiment {spec.name} is restarted (resumePolicy {exp['spec']['resumePolicy']}): "
        f"its {len(_trials_of(backend, old))} trial(s) are kept, up to "
        f"{exp['spec'].get('maxTrialCount')} in all")})
    return ExperimentRun(backend, exp, spec, base_dir, lease, trials=_trials_of(backend, old)).run()


def _trials_of(backend: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    meta = obj["metadata"]
    items = backend.store.list("Trial", meta.get("namespace", "default"))
    mine = [t for t in items if (t["metadata"].get("labels") or {}).get(EXPERIMENT_LABEL)
            == meta["name"]]
    return sorted(mine, key=lambda t: (t["metadata"].get("creationTimestamp", ""),
                                       (t.get("status") or {}).get("startTime", "")))


def delete(backend: Any, obj: dict[str, Any]) -> None:
    """An Experiment owns its Trials: deleting it deletes them (and their logs)."""
    if obj.get("kind") == "Experiment":
        for trial in _trials_of(backend, obj):
            backend.store.delete("Trial", trial["metadata"]["name"],
                                 trial["metadata"].get("namespace", "default"))


def logs(backend: Any, obj: dict[str, Any], replica: str | None) -> Iterator[str]:
    ns = obj["metadata"].get("namespace", "default")
    if obj.get("kind") == "Trial":
        return iter_log(backend.store.run_path("Trial", obj["metadata"]["name"], ns)
                        / "trial.log")

    def every_trial() -> Iterator[str]:
        for trial in _trials_of(backend, obj):
            name = trial["metadata"]["name"]
            for line in iter_log(backend.store.run_path("Trial", name, ns) / "trial.log"):
                yield f"[{name}] {line}"

    return every_trial()


# --- ownership: what the next command does when the owner of a run died ------------------

def in_progress(obj: dict[str, Any]) -> bool:
    """An Experiment not yet complete, or a Trial not yet finished."""
    if obj.get("kind") == "Trial":
        return tuning_status.trial_state(obj) in ("Pending", "Running")
    return bool(obj.get("status")) and not tuning_status.is_completed(obj)


def owner_of(obj: dict[str, Any]) -> tuple[str, str]:
    """Trials are run by their Experiment's owner."""
    if obj.get("kind") == "Trial":
        exp = (obj["metadata"].get("labels") or {}).get(EXPERIMENT_LABEL)
        if exp:
            return "Experiment", str(exp)
    return str(obj.get("kind")), obj["metadata"]["name"]


def abandon(backend: Any, obj: dict[str, Any], why: str, save: bool = True) -> dict:
    """Mark a run whose owner died: unfinished trials Killed, the experiment Failed."""
    if obj.get("kind") == "Trial":
        tuning_status.trial_finished(obj, "Killed", why)
        if save:
            backend.store.put(obj)
        return obj
    trials = _trials_of(backend, obj)
    for trial in trials:
        if in_progress(trial):
            tuning_status.trial_finished(trial, "Killed", why)
            if save:
                backend.store.put(trial)
    with contextlib.suppress(KeyError, TypeError, ValueError):  # a hand-written object
        tuning_status.summarize(obj, trials)
    obj.setdefault("status", {})
    tuning_status.interrupted(obj, why)
    if save:
        backend.store.put(obj)
    return obj
