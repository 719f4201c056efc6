"""How a finished Katib trial ended: its metrics as the collector reads them once the trial
is over, and its condition (Killed, EarlyStopped, Failed, MetricsUnavailable, Succeeded)
with a reason in the learner's terms.

Katib's collectors read what a trial reported (the File collector the whole file at the
end, the TensorFlowEvent collector the event files); its trial controller then sets the
condition (pkg/controller.v1beta1/trial/trial_controller_util.go `UpdateTrialStatusCondition`:
no objective in the observation is MetricsUnavailable). controller.py writes the result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from lab.backends.local.tuning import status as tuning_status
from lab.backends.local.tuning import tfevent
from lab.backends.local.tuning import trials as tuning_trials
from lab.backends.local.tuning.metrics import UNAVAILABLE, MetricLog
from lab.backends.local.tuning.spec import Spec
from lab.backends.local.tuning.trials import Running


def read_metrics(spec: Spec, run: Running, record: Path) -> None:
    """The trial's last output read, then its metrics as the collector reads them at the
    end, into `run.metrics` (and `run.events` for TensorFlowEvent); the observation and the
    objective's reports go into the Trial."""
    for line in run.tail.read(final=True):
        run.metrics.feed(line, run.fmt)
    if spec.collector.kind == "File":
        run.metrics = whole_file(spec, run)
    elif spec.collector.kind == "TensorFlowEvent":
        run.metrics, run.events = tfevent.metric_log(
            run.tail.path, spec.objective.names, spec.collector.filters)
        if run.proc is not None:  # it ran: what the folder holds is its own
            tuning_trials.record_dir_files(run.tail.path, record)
    observation = run.metrics.observation()
    if observation is not None:
        run.trial["status"]["observation"] = observation
    run.trial["_reports"] = list(run.metrics.values[spec.objective.metric])


def ending(spec: Spec, run: Running, *, rc: int, detail: str, killed: bool,
           log: Callable[[], Path]) -> tuple[str, str]:
    """(condition, reason) of a trial whose metrics were read (read_metrics); `log` gives
    the trial's log, read only for a failed process's last line."""
    trial = run.trial
    if killed:
        return "Killed", detail or "stopped before it finished"
    if run.early_stopped:
        rule = (trial["spec"].get("earlyStoppingRules") or [{}])[0]
        return "EarlyStopped", (
            f"its best '{rule.get('name')}' by report {rule.get('startStep')} was "
            f"{'below' if rule.get('comparison') == 'less' else 'above'} the median "
            f"stopping value {rule.get('value')}")
    if rc != 0:
        return "Failed", detail or getattr(run.proc, "detail", "") or exit_detail(log(), rc)
    if run.fmt == "JSON" and run.metrics.bad_line is not None:
        number, text = run.metrics.bad_line
        return "Failed", (
            f"line {number} of the metrics file is not a JSON object ({text!r}): Katib's "
            "File collector stops on it (failed to parse the json object)")
    if tuning_status.trial_objective(trial) == UNAVAILABLE or \
            run.metrics.observation() is None:
        return "MetricsUnavailable", missing(spec, run)
    return "Succeeded", detail


def exit_detail(log: Path, rc: int) -> str:
    """Why the trial failed, as `kubectl describe` of its pod would hint: the exit
    code and the last line its process printed (e.g. a missing script)."""
    last = ""
    with contextlib.suppress(OSError), open(log, "rb") as fh:
        fh.seek(max(0, log.stat().st_size - 4096))
        lines = [ln for ln in fh.read().decode(errors="replace").splitlines()
                 if ln.strip()]
        last = lines[-1].strip()[:200] if lines else ""
    return f"process exited with code {rc}" + (f": {last}" if last else "")


def whole_file(spec: Spec, run: Running) -> MetricLog:
    """The File collector's result, read as Katib reads it once the trial ends
    (file-metricscollector.go CollectObservationLog: the whole file, line by line), so
    a trial that rewrites its file (mode "w") reports what the file finally holds."""
    final = MetricLog(spec.objective.names, spec.collector.filters)
    try:
        text = run.tail.path.read_bytes().decode(errors="replace")
    except OSError:
        return final
    for line in text.split("\n"):
        final.feed(line.rstrip("\r"), run.fmt)
    return final


def missing(spec: Spec, run: Running) -> str:
    """Why the objective is unavailable, in the learner's terms."""
    metric = spec.objective.metric
    if run.events is not None:
        return missing_event(spec, run, run.events)
    where = "the output" if spec.collector.kind == "StdOut" else "the file"
    if run.metrics.unread.get(metric):
        return (f"'{metric}' never appeared in {where} as a string: Katib's JSON "
                f"collector reads only string values, write {{\"{metric}\": \"0.3\"}} "
                f"instead of {{\"{metric}\": 0.3}}")
    near = run.metrics.near(metric)
    if near is not None:
        return (f"'{metric}' never appeared in {where}; did you mean '{near}'? The trial "
                f"reported '{near}', and metric names are case-sensitive: set "
                f"objectiveMetricName to '{near}' or print {metric}=VALUE")
    return f"'{metric}' never appeared in {where}"


def missing_event(spec: Spec, run: Running, got: tfevent.Collected) -> str:
    """Why no event file gave the objective (TensorFlowEvent collector)."""
    metric, folder = spec.objective.metric, run.tail.path
    text = (f"'{metric}' is in no TensorFlow event file under {folder} (Katib's "
            "TensorFlowEvent collector matches a tag starting with the name's last part, "
            "in a folder ending with the part before it)")
    near = run.metrics.near(metric)
    if near is not None:
        text += f"; the files hold '{near}': set objectiveMetricName to '{near}'"
    elif got.seen:
        text += f"; the files hold {', '.join(sorted(set(got.seen))[:8])}"
    elif got.skipped:
        text += f"; unreadable: {'; '.join(got.skipped[:3])}"
    else:
        text += "; the trial wrote no event file there"
    return text
