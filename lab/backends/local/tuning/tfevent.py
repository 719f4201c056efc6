"""Katib's TensorFlowEvent metrics collector: metrics read from TensorBoard event files.

Facts from Katib v0.19 (read, not copied):
- when: the collector sidecar waits for the training process to end, then parses once
  (cmd/metricscollector/v1beta1/tfevent-metricscollector/main.py: WaitMainProcesses, then
  MetricsCollector.parse_file); it takes no early-stopping rules.
- which files: every file under the collector's directory, walked with os.walk
  (pkg/metricscollector/v1beta1/tfevent-metricscollector/tfevent_loader.py
  TFEventFileParser.find_all_files); each is loaded with TensorBoard's EventAccumulator
  (all scalars and tensors kept); a file that fails to load is skipped with a warning.
- which values (TFEventFileParser.parse_summary, `_should_consider`): a metric name
  `a/b` matches a tag starting with `b` in a file whose folder ends with `a`; a name without
  `/` matches a tag starting with it in any file. Tensor summaries (TF2's tf.summary.scalar)
  are reported first, as `str()` of the tensor's ndarray (float32 `0.5` -> "0.5"), then
  old-style simple values as `str()` of the Python float ("0.10000000149011612").
- unavailable (MetricsCollector.parse_file): when no log names the objective metric, the
  whole report is one "unavailable" objective value -- additional metrics are dropped.
- time: each log carries its event's wall time to the second (rfc3339 of
  datetime.fromtimestamp); katib-db-manager returns the logs ORDER BY time
  (pkg/db/v1beta1/mysql/mysql.go GetObservationLog) and the trial controller takes min and
  max over numeric values and `latest` from the last log of the latest second
  (pkg/controller.v1beta1/trial/trial_controller_util.go getMetrics). Logs of the same
  second keep the collector's order here (MySQL leaves ties unordered).

The reading itself is TensorBoard's own EventAccumulator (the `tf` extra ships it), on
TensorBoard's TensorFlow-free reader: the same records and protos, without importing
TensorFlow into kflab.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.backends.local.tuning.metrics import MetricLog
from lab.deps import install_extras
from lab.errors import LabError


@dataclass(frozen=True)
class Report:
    """One metric log, as the collector sends it to katib-db-manager."""

    name: str
    value: str
    second: int  # the event's wall time, to the second (the log's rfc3339 time stamp)


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def _loader() -> tuple[Any, Any, Any, Any]:
    """TensorBoard's EventAccumulator, its tag kinds and make_ndarray; a clear error when the
    `tf` extra is missing."""
    # TensorBoard picks its TensorFlow-free reader when this marker module exists
    # (tensorboard/compat/__init__.py); the event files read the same either way.
    sys.modules.setdefault("tensorboard.compat.notf",
                           types.ModuleType("tensorboard.compat.notf"))
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.backend.event_processing.tag_types import SCALARS, TENSORS
        from tensorboard.util.tensor_util import make_ndarray
    except ImportError as exc:
        raise LabError(f"the TensorFlowEvent metrics collector reads event files with "
                       f"TensorBoard, which is not installed ({exc})",
                       hint=f"install the tf extra: {install_extras('tf')}") from None
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    return EventAccumulator, SCALARS, TENSORS, make_ndarray


def should_consider(tag: str, metric: str, event_file: str) -> bool:
    """tfevent_loader.py `_should_consider`: the tag starts with the name's last part and
    the file's folder ends with the name's folder (any folder for a bare name)."""
    parts = metric.split("/")
    folder = os.path.dirname(metric) if len(parts) >= 2 else os.path.dirname(event_file)
    return tag.startswith(parts[-1]) and os.path.dirname(event_file).endswith(folder)


def _second(wall_time: float) -> int:
    """The log's time stamp: datetime.fromtimestamp, then rfc3339 (whole seconds)."""
    return int(datetime.fromtimestamp(wall_time, UTC).replace(microsecond=0).timestamp())


def parse_file(path: str, names: tuple[str, ...]) -> tuple[list[Report], list[str]]:
    """TFEventFileParser.parse_summary: one file's reports, tensors first, then scalars;
    and the file's tags (for a did-you-mean when the objective is missing)."""
    accumulator_cls, scalars, tensors, make_ndarray = _loader()
    acc = accumulator_cls(path, size_guidance={scalars: 0, tensors: 0})
    acc.Reload()
    tags = acc.Tags()
    out: list[Report] = []
    for tag in tags[tensors]:
        for m in names:
            if should_consider(tag, m, path):
                out.extend(Report(m, str(make_ndarray(t.tensor_proto)), _second(t.wall_time))
                           for t in acc.Tensors(tag))
    for tag in tags[scalars]:  # "old-style" simple values (tf.compat.v1, tensorboardX, torch)
        for m in names:
            if should_consider(tag, m, path):
                out.extend(Report(m, str(s.value), _second(s.wall_time))
                           for s in acc.Scalars(tag))
    return out, [*tags[tensors], *tags[scalars]]


@dataclass
class Collected:
    reports: list[Report]
    seen: list[str]  # every tag, as `folder/tag` relative to the directory
    skipped: list[str]  # files that did not load (the collector's warnings)


def collect(directory: Path, names: tuple[str, ...]) -> Collected:
    """MetricsCollector.parse_file: every file under `directory`, in os.walk's order."""
    _loader()  # the extra's error first, before any file
    reports: list[Report] = []
    seen: list[str] = []
    skipped: list[str] = []
    for root, _dirs, files in os.walk(directory):
        for f in files:
            path = os.path.join(root, f)
            if os.path.isdir(path):
                continue
            try:
                got, tags = parse_file(path, names)
            except Exception as exc:  # the collector warns ("Unexpected error") and goes on
                skipped.append(f"{path} ({exc})")
                continue
            reports.extend(got)
            rel = os.path.relpath(root, directory)
            seen.extend(t if rel == "." else f"{rel}/{t}" for t in tags)
    return Collected(reports, seen, skipped)


def metric_log(directory: Path, names: tuple[str, ...],
               filters: tuple[str, ...]) -> tuple[MetricLog, Collected]:
    """The trial's metric logs as katib-db-manager returns them (ordered by time), ready for
    MetricLog.observation(): min/max over numeric values, latest = the last log."""
    got = collect(directory, names)
    reports, seen = got.reports, got.seen
    log = MetricLog(names, filters)
    if not any(r.name == names[0] for r in reports):
        reports = []  # one "unavailable" objective log: nothing else is kept
    for r in sorted(reports, key=lambda r: r.second):  # stable: ties keep report order
        log.values[r.name].append(r.value)
    for tag in seen:
        if tag not in log.values:
            log._other(tag)
    return log, got
