"""Katib's experiment controller on the local backend, for one Experiment: trials are
created as suggestions come, run as local processes or containers, and the status follows
Katib's controllers.

One `apply` (handler.py) drives the whole experiment in the foreground, like a controller
loop: ask the suggestion service (suggestion.py) for at most parallelTrialCount
assignments, start each trial from the primary container's command and args (argv, never a
shell: trials.py), read its metrics as it runs, judge how it ended (outcome.py), tell the
suggestion service, and recompute the Experiment status after every change (status.py).
Every trial process belongs to a ChildGroup and is recorded in the experiment's lease
(owners.py), so Ctrl-C, SIGTERM or SIGHUP -- or `kflab delete`/`down` from another
terminal -- kills them all and marks the experiment with the reason, and a kflab killed
outright leaves a record that the next command uses to stop them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import signals, state
from lab.backends.local import fidelity, gpus
from lab.backends.local.containers.engine import Engine
from lab.backends.local.owners import Lease
from lab.backends.local.procs import ChildGroup, kill_group
from lab.backends.local.tuning import earlystop, jobtrial, outcome
from lab.backends.local.tuning import status as tuning_status
from lab.backends.local.tuning import trials as tuning_trials
from lab.backends.local.tuning.containers import pull_images, trial_engine
from lab.backends.local.tuning.differences import differences
from lab.backends.local.tuning.hyperband import NoSuggestion
from lab.backends.local.tuning.jobtrial import JOB_KINDS, JobTrial
from lab.backends.local.tuning.metrics import UNAVAILABLE, MetricLog
from lab.backends.local.tuning.spec import Spec
from lab.backends.local.tuning.suggestion import Suggestions, is_float
from lab.backends.local.tuning.trials import Running
from lab.state import StateError

# Seconds between reads of running trials' output (median stopping needs them live);
# a finished trial wakes the loop at once through the exit queue.
WATCH = 0.2
PLOTS_ANNOTATION = "kflab.dev/plots"
IGNORED_ANNOTATION = "kflab.dev/ignored-fields"
DIFFERENCES_ANNOTATION = fidelity.ANNOTATION


@dataclass
class ExperimentRun:
    """One Experiment run to completion (or restarted with the trials it has)."""

    backend: Any
    exp: dict[str, Any]
    spec: Spec
    base_dir: Path
    lease: Lease
    trials: list[dict[str, Any]] = field(default_factory=list)
    active: dict[str, Running] = field(default_factory=dict)
    exits: queue.SimpleQueue[str] = field(default_factory=queue.SimpleQueue)
    group: ChildGroup | None = None
    engine: Engine | None = None  # trials are containers of their image (containers.py)

    def __post_init__(self) -> None:
        self.store = self.backend.store
        self.ns = self.spec.namespace
        self.suggestions = Suggestions(self.spec)
        self.differences = differences(self.spec)
        self.parallel = self.spec.parallel
        self.engine = trial_engine(self.spec)
        self.private_metrics = self.engine is not None or self._private_metrics()
        if self.private_metrics:
            self.differences = [d for d in self.differences
                                if d[0] != "katib.collector.file-parallel"]
        elif self.spec.collector.kind in ("File", "TensorFlowEvent") and self.parallel > 1:
            self.parallel = 1  # announced: katib.collector.file-parallel / tfevent-parallel
        self.t0 = time.monotonic()
        self.host_gpus = gpus.machine_has_gpus()
        if self.trials:
            self.suggestions.seed(self.trials)

    def _private_metrics(self) -> bool:
        """Whether each trial gets its own folder at the File collector's path (mountns.py),
        as Katib mounts one in each pod: for a Job trial whose collector folder is an
        absolute path apart from the manifest's folder (neither inside nor above it), when
        a private mount namespace works here. Else trials share the one path."""
        coll = self.spec.collector
        if coll.kind != "File" or self.spec.trial_spec.get("kind") in JOB_KINDS \
                or not os.path.isabs(str(coll.path)):
            return False
        folder = Path(str(coll.path)).parent
        here = self.base_dir.resolve()
        try:
            there = folder.resolve()
            if here.is_relative_to(there) or there.is_relative_to(here):
                return False
            folder.mkdir(parents=True, exist_ok=True)  # the mount point, as before
        except OSError:
            return False  # each trial says why (trials.prepare_metrics_file)
        try:
            out = subprocess.run([sys.executable, "-I", "-S", str(tuning_trials.MOUNTNS),
                                  "probe", str(folder)], capture_output=True, text=True,
                                 timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return out.stdout.strip() == "ready"

    # --- persistence ---------------------------------------------------------------------

    def save(self, *trials: dict[str, Any]) -> None:
        for trial in trials:
            self.store.put(trial)
        self.store.put(self.exp)

    def refresh(self) -> None:
        """Recount and, while the experiment is not complete, apply Katib's rules."""
        reached = tuning_status.summarize(self.exp, self.trials)
        if not tuning_status.is_completed(self.exp):
            tuning_status.update_condition(self.exp, reached, self.suggestions.exhausted)

    # --- trials ----------------------------------------------------------------------------

    def _rules(self) -> list[dict[str, Any]]:
        """Median stopping, fixed when the trial is created (tuning/earlystop.py)."""
        es = self.spec.early
        if es is None:
            return []
        succeeded = [t.get("_reports", []) for t in self.trials
                     if tuning_status.trial_state(t) == "Succeeded"]
        return earlystop.rules(succeeded, metric=self.spec.objective.metric,
                               maximize=self.spec.objective.type == "maximize",
                               start_step=es.start_step,
                               min_trials_required=es.min_trials_required)

    def _gpus_for(self, name: str, asks: dict[str, int]) -> dict[str, list[str]] | None:
        """The trial's GPUs from the shared allocation (gpus.py), or None when others hold
        them and trials of this experiment are running (the loop tries again as they
        end). With none running, wait as a Pending pod waits for its GPUs."""
        holder = gpus.holder_of("Trial", self.ns, name)
        whose = {"token": self.lease.token,
                 "owner": f"{self.lease.kind}/{self.lease.namespace}/{self.lease.name}"}
        got = gpus.allocate(self.store.root, holder, asks, **whose)
        if got is None and self.active:
            return None
        if got is None:
            got = gpus.acquire(self.store.root, holder, asks, **whose, on_pending=lambda msg: (
                self.backend.emit({"event": "message", "text": (
                    f"trial {name} is waiting for {sum(asks.values())} GPU(s): {msg} (held "
                    f"by: {', '.join(gpus.holders(self.store.root))})")})))
        return got

    def start_one(self, group: ChildGroup) -> bool:
        name = f"{self.spec.name}-{secrets.token_hex(4)}"
        held: list[str] = []
        job_held: dict[str, list[str]] | None = None
        job_trial = self.spec.trial_spec.get("kind") in JOB_KINDS
        asks = ({"main": self.spec.gpus} if self.spec.gpus else {}) if not job_trial else \
            (jobtrial.gpu_asks(tuning_trials.run_spec(
                self.spec, name, [{"name": p.name, "value": "0"} for p in self.spec.params]))
             if self.host_gpus else {})
        if asks:
            found = self._gpus_for(name, asks)
            if found is None:  # the loop waits for a running trial to end
                return False
            if job_trial:
                job_held = found
                held = [g for ids in found.values() for g in ids]
            else:
                held = found["main"]
        got = self.suggestions.ask(self.trials)
        if got is None:
            gpus.release(self.store.root, gpus.holder_of("Trial", self.ns, name))
            return False
        otrial, assignments, grid_id = got
        runspec = tuning_trials.run_spec(self.spec, name, assignments)
        trial = tuning_trials.trial_object(self.exp, self.spec, name, assignments, runspec,
                                           self._rules())
        tuning_status.trial_created(trial)
        trial["_grid_id"] = grid_id
        self.trials.append(trial)
        log = self.store.run_file("Trial", name, self.ns, "trial.log")
        record = state.path(self.store.root, "metrics-files.json")
        if job_trial:
            started = tuning_trials.launch_job(self.backend, self.lease, self.spec, runspec,
                                               name, log, self.base_dir, record,
                                               held=job_held, engine=self.engine)
        else:
            started = tuning_trials.launch(group, self.spec, runspec, name, log,
                                           self.base_dir, record,
                                           gpus=held if self.host_gpus else None,
                                           private=log.parent / "metrics"
                                           if self.private_metrics else None,
                                           engine=self.engine, root=self.store.root)
        if held:
            trial["metadata"].setdefault("annotations", {})[gpus.ANNOTATION] = \
                gpus.labels(held)
        proc = started.proc
        coll = self.spec.collector
        metrics = MetricLog(self.spec.objective.names, coll.filters)
        self.backend.emit({"event": "trial-started", "experiment": self.spec.name,
                           "trial": name, "params": {a["name"]: a["value"]
                                                     for a in assignments}})
        run = Running(trial, proc, started.tail, metrics, otrial.number,
                      time.monotonic(), fmt=coll.format, grid_id=grid_id)
        if proc is None:
            self.finish(run, rc=127, detail=str(started.problem))
            return True
        tuning_status.trial_running(trial)
        self.active[name] = run
        threading.Thread(target=self._reap, args=(name, proc), daemon=True).start()
        self.refresh()
        self.save(trial)
        return True

    def _reap(self, name: str, proc: Any) -> None:
        """Wake the loop the moment a trial exits (no polling latency per trial)."""
        proc.wait()
        self.exits.put(name)

    def _early_stop(self, run: Running) -> bool:
        return earlystop.should_stop(run.trial["spec"].get("earlyStoppingRules") or [],
                                     run.metrics.values, objective=self.spec.objective.metric,
                                     maximize=self.spec.objective.type == "maximize")

    def watch(self, run: Running) -> None:
        for line in run.tail.read():
            run.metrics.feed(line, run.fmt)
        if run.proc.poll() is None and not run.early_stopped and self._early_stop(run):
            run.early_stopped = True
            _stop(run.proc)

    def finish(self, run: Running, *, rc: int, detail: str = "", killed: bool = False) -> None:
        outcome.read_metrics(self.spec, run, state.path(self.store.root, "metrics-files.json"))
        trial = run.trial
        ctype, detail = outcome.ending(
            self.spec, run, rc=rc, detail=detail, killed=killed,
            log=lambda: self.store.run_path("Trial", trial["metadata"]["name"], self.ns)
            / "trial.log")
        kind = ((trial.get("spec") or {}).get("runSpec") or {}).get("kind")
        tuning_status.trial_finished(trial, ctype, detail, job_kind=kind)
        value = tuning_status.trial_objective(trial)
        # Katib tells its suggestion service Succeeded and EarlyStopped trials, with their
        # objective (pkg/suggestion/v1beta1/internal/trial.py `Trial.convert`).
        self.suggestions.tell(trial["metadata"]["name"], run.number, run.grid_id, ctype, value)
        self.active.pop(trial["metadata"]["name"], None)
        if gpus.ANNOTATION in (trial["metadata"].get("annotations") or {}):
            with contextlib.suppress(StateError):
                gpus.release(self.store.root, gpus.holder_of("Trial", self.ns,
                                                             trial["metadata"]["name"]))
        if self.group is not None and run.proc is not None and \
                not isinstance(run.proc, JobTrial):
            self.group.forget(run.proc)
        self.refresh()
        self.save(_public(trial))
        self.backend.emit({"event": "trial-finished", "experiment": self.spec.name,
                           "trial": trial["metadata"]["name"], "state": ctype,
                           "objective": None if value == UNAVAILABLE else value,
                           "seconds": round(time.monotonic() - run.started, 2),
                           "detail": detail})

    def to_start(self) -> int:
        """How many trials to create now, by Katib's count (kubeflow/katib
        pkg/controller.v1beta1/experiment/experiment_controller.go `ReconcileTrials`):
        up to parallelTrialCount active, and at most maxTrialCount minus the completed
        trials, where completed leaves out MetricsUnavailable ones -- so such trials make
        Katib create more than maxTrialCount trials, and so does this."""
        states = [tuning_status.trial_state(t) for t in self.trials]
        active = sum(s in ("Pending", "Running") for s in states)
        if self.spec.max_trials is None:
            required = self.parallel
        else:
            completed = sum(s in ("Succeeded", "Failed", "Killed", "EarlyStopped")
                            for s in states)
            required = min(self.spec.max_trials - completed, self.parallel)
        return max(required - active, 0)

    def loop(self, group: ChildGroup) -> None:
        """Katib's experiment controller: create trials while the experiment is not
        complete; once it is (goal, max failed, max trials), running trials go on until
        they finish, and only the counts and the optimal trial still change
        (experiment_controller.go `Reconcile`: a completed experiment with running trials
        is still reconciled, without new trials; katib#855)."""
        announced = False
        while True:
            for name in list(self.active):
                run = self.active[name]
                self.watch(run)
                rc = run.proc.poll()
                if rc is not None:
                    self.finish(run, rc=rc)
            if tuning_status.is_completed(self.exp):
                if not self.active:
                    break
                if not announced:
                    announced = True
                    cond = tuning_status.last_condition(self.exp) or {}
                    self.backend.emit({"event": "message", "text": (
                        f"experiment {cond.get('type', '').lower()} "
                        f"({cond.get('reason', '')}); {len(self.active)} running trial(s) "
                        "finish as Katib lets them")})
            else:
                wanted = self.to_start()
                if self.suggestions.service is not None and wanted and \
                        not self.suggestions.batch and not self.request(wanted):
                    break  # Katib would ask again forever; said in the status
                for _ in range(wanted):
                    if self.suggestions.exhausted or not self.start_one(group) or \
                            tuning_status.is_completed(self.exp):
                        break
                if not self.active:
                    self.refresh()
                    if tuning_status.is_completed(self.exp) or self.suggestions.exhausted \
                            or not wanted:
                        break  # done, or nothing left to suggest and nothing running
                    continue
            with contextlib.suppress(queue.Empty):
                self.exits.get(timeout=WATCH / 4 if self.spec.early else WATCH)

    def request(self, count: int) -> bool:
        """One suggestion request of Katib's controller to a SERVICES algorithm. A refused
        request is retried on the next pass while trials run (Katib's reconcile does the
        same); with none running Katib would retry forever and the Experiment would stay
        Running with no trial, so the run ends here saying so (katib.hyperband.stalled)."""
        try:
            self.suggestions.request(count, self.trials)
            return True
        except NoSuggestion as exc:
            if self.active:
                return True
            why = (f"Katib's {self.spec.algorithm} suggestion could not answer the request: "
                   f"{exc}. "
                   "On a cluster this Experiment stays Running with no new trial")
            tuning_status.interrupted(self.exp, why)
            self.backend.emit({"event": "message", "text": why})
            notes = self.exp["metadata"].setdefault("annotations", {})
            earlier = [i for i in notes.get(DIFFERENCES_ANNOTATION, "").split(",") if i]
            fidelity.announce(self.backend, self.exp, [("katib.hyperband.stalled", {})])
            notes[DIFFERENCES_ANNOTATION] = ",".join(dict.fromkeys(
                [*earlier, "katib.hyperband.stalled"]))  # added to the run's earlier notes
            self.save()
            return False

    def run(self) -> dict[str, Any]:
        self.save()
        self.backend.emit({"event": "experiment-started", "experiment": self.spec.name,
                           "algorithm": self.spec.algorithm, "parallel": self.parallel,
                           "max_trials": self.spec.max_trials,
                           "params": [p.name for p in self.spec.params],
                           "metric": self.spec.objective.metric})
        if self.spec.warnings:
            self.exp["metadata"].setdefault("annotations", {})[IGNORED_ANNOTATION] = \
                "; ".join(self.spec.warnings)
        fidelity.announce(self.backend, self.exp, self.differences)
        if self.engine is not None:
            pull_images(self.engine, self.spec, self.backend.emit)
        lease = self.lease
        with ChildGroup(lease.token, on_start=lease.add, on_exit=lease.drop) as group:
            self.group = group
            try:
                self.loop(group)
            except BaseException as exc:
                why = signals.reason(exc, lease.stop_request()) \
                    if isinstance(exc, KeyboardInterrupt) else f"kflab hit an error: {exc}"
                for run in list(self.active.values()):
                    if isinstance(run.proc, JobTrial):
                        run.proc.stop(grace=1.0)
                group.stop_all(grace=1.0)
                # The status says why; a full or read-only state folder may refuse even
                # that, and then the next command marks it (its lease will be free).
                with contextlib.suppress(StateError):
                    for run in list(self.active.values()):
                        self.finish(run, rc=-1, detail=why, killed=True)
                    if not tuning_status.is_completed(self.exp):  # a completion stands
                        tuning_status.interrupted(self.exp, why)
                    self.save()
                cond = tuning_status.last_condition(self.exp) or {}
                self.backend.emit({"event": "experiment-finished",
                                   "experiment": self.spec.name, "condition": cond.get("type"),
                                   "reason": cond.get("reason"), "best": None,
                                   "assignments": [], "plots": ""})
                raise
        self.refresh()
        self.plots()
        self.save()
        best = self.exp["status"]["currentOptimalTrial"]
        cond = tuning_status.last_condition(self.exp) or {}
        self.backend.emit({"event": "experiment-finished", "experiment": self.spec.name,
                           "condition": cond.get("type"), "reason": cond.get("reason"),
                           "best": best.get("bestTrialName"),
                           "assignments": best.get("parameterAssignments", []),
                           "plots": self.exp["metadata"].get("annotations", {})
                           .get(PLOTS_ANNOTATION, "")})
        return self.exp

    def plots(self) -> None:
        from lab.backends.local.tuning import plots as tuning_plots

        out = self.store.run_dir("Experiment", self.spec.name, self.ns)
        rows = []
        for i, t in enumerate(self.trials):
            raw = tuning_status.trial_objective(t)
            ok = tuning_status.trial_state(t) == "Succeeded" and is_float(raw)
            rows.append((i, float(raw) if ok else None, tuning_status.trial_state(t)))
        made = []
        try:
            made.append(tuning_plots.objective_plot(
                state.path(out, "objective.png"), rows, self.spec.objective.metric,
                self.spec.objective.type == "maximize", self.spec.name, self.spec.algorithm))
            made.append(tuning_plots.importance_plot(state.path(out, "importance.png"),
                                                     self.suggestions.study, self.spec.name,
                                                     self.spec.algorithm))
        except Exception as exc:  # plots are a bonus: never fail the experiment for them
            self.backend.emit({"event": "message", "text": f"plots skipped: {exc}"})
        paths = [str(p) for p in made if p is not None]
        if paths:
            self.exp["metadata"].setdefault("annotations", {})[PLOTS_ANNOTATION] = \
                ",".join(paths)


def _stop(proc: Any) -> None:
    """End a running trial: a process group, or a training job's replicas."""
    if isinstance(proc, JobTrial):
        proc.stop()
        return
    kill_group(proc.pid, grace=2.0)
    proc.wait()


def _public(trial: dict[str, Any]) -> dict[str, Any]:
    """The stored Trial: private bookkeeping (keys starting with '_') left out."""
    return {k: v for k, v in trial.items() if not k.startswith("_")}
