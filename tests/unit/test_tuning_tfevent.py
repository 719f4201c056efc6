"""Katib's TensorFlowEvent collector on the local backend (lab/backends/local/tuning/tfevent.py).

Event files are real: written with TensorBoard's own EventFileWriter and summary protos (the
records tf.summary and tensorboardX write), on TensorBoard's TensorFlow-free path so that no
test imports TensorFlow. Expected values follow Katib v0.19's loader
(pkg/metricscollector/v1beta1/tfevent-metricscollector/tfevent_loader.py) and its own unit
test (test/unit/v1beta1/metricscollector/test_tfevent_metricscollector.py: 3 steps of
train|test x accuracy|loss give 12 logs for the qualified names, 6 for train alone).
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tuning_helpers import container, experiment, write

from lab.backends.local import LocalBackend
from lab.backends.local.tuning import spec as tuning_spec
from lab.backends.local.tuning import tfevent
from lab.backends.local.tuning.differences import differences
from lab.backends.local.tuning.handler import _defaults
from lab.errors import InputError

# TensorBoard's TensorFlow-free code path (tensorboard/compat/__init__.py): importing the
# writer must not pull TensorFlow into the test process.
sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: E402
from tensorboard.plugins.scalar import summary_v2  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402

SIMPLE = "simple"  # tensorboardX / tf.compat.v1: Summary.Value.simple_value
TENSOR = "tensor"  # TF2 tf.summary.scalar: a float32 tensor with the scalars plugin


def write_events(folder: Path, points: list[tuple[str, float, float, str]]) -> None:
    """One event file in `folder`: (tag, value, wall_time, SIMPLE|TENSOR) per event."""
    writer = EventFileWriter(str(folder))
    for step, (tag, value, wall, how) in enumerate(points):
        if how == SIMPLE:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
                tag=tag, simple_value=value)])
        else:
            summary = summary_v2.scalar_pb(tag, value)
        writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    writer.close()


def names(reports: list[tfevent.Report]) -> list[str]:
    return [r.name for r in reports]


def test_tfevent_collector_reads_what_katibs_loader_reads(tmp_path: Path) -> None:
    """Katib's tensorboardX test, replayed: qualified names read train/ and test/, bare
    names read the folder they are given; then the value strings (str() of a float32
    tensor's array, str() of a simple value's float) and the order of the stored logs."""
    for folder in ("train", "test"):
        write_events(tmp_path / folder, [(m, 0.1, 1000.0 + i, SIMPLE)
                                         for m in ("accuracy", "loss") for i in range(3)])
    qualified = ("train/accuracy", "train/loss", "test/accuracy", "test/loss")
    got = tfevent.collect(tmp_path, qualified)
    assert len(got.reports) == 12
    assert set(names(got.reports)) == set(qualified)
    train = tfevent.collect(tmp_path / "train", ("accuracy", "loss"))
    assert len(train.reports) == 6 and set(names(train.reports)) == {"accuracy", "loss"}
    # a simple value is a float32 in the proto: str() of the Python float it becomes
    assert {r.value for r in got.reports} == {"0.10000000149011612"}
    assert sorted(set(got.seen)) == ["test/accuracy", "test/loss", "train/accuracy",
                                     "train/loss"]


def test_tfevent_values_order_and_latest(tmp_path: Path) -> None:
    """Tensors are reported before simple values, each a float32 array's str(); the stored
    logs are ordered by their second, so `latest` is the value of the latest second, not
    the last one in the file; a tag that merely starts with the name counts too."""
    write_events(tmp_path / "test", [
        ("accuracy", 0.25, 2000.2, TENSOR),
        ("accuracy", 0.5, 1000.9, TENSOR),       # earlier second, later in the file
        ("accuracy_top5", 0.75, 1500.0, TENSOR),  # starts with "accuracy": Katib takes it
        ("loss", 0.1, 1000.0, SIMPLE),
    ])
    write_events(tmp_path / "train", [("accuracy", 0.125, 3000.0, TENSOR)])
    log, got = tfevent.metric_log(tmp_path, ("test/accuracy", "loss"), ())
    in_file = [(r.name, r.value, r.second) for r in got.reports
               if r.name == "test/accuracy"]
    assert in_file == [("test/accuracy", "0.25", 2000), ("test/accuracy", "0.5", 1000),
                       ("test/accuracy", "0.75", 1500)]
    assert log.values["test/accuracy"] == ["0.5", "0.75", "0.25"]  # ORDER BY time
    assert log.values["loss"] == ["0.10000000149011612"]
    obs = {m["name"]: m for m in log.observation()["metrics"]}
    assert obs["test/accuracy"] == {"name": "test/accuracy", "min": "0.25", "max": "0.75",
                                    "latest": "0.25"}


def test_tfevent_without_the_objective_reports_only_unavailable(tmp_path: Path) -> None:
    """MetricsCollector.parse_file: no objective log -> one 'unavailable' objective log, the
    additional metrics are dropped; the tags the files hold are kept for the message."""
    write_events(tmp_path, [("loss", 0.5, 1000.0, TENSOR), ("Accuracy", 0.9, 1000.0, TENSOR)])
    (tmp_path / "notes.txt").write_text("not an event file\n")
    log, got = tfevent.metric_log(tmp_path, ("accuracy", "loss"), ())
    assert log.observation() is None
    assert log.near("accuracy") == "Accuracy"
    assert sorted(got.seen) == ["Accuracy", "loss"]


def _tfevent_experiment(path: str, **changes: Any) -> dict[str, Any]:
    obj = experiment(objective={"type": "maximize", "objectiveMetricName": "accuracy"},
                     metricsCollectorSpec={"collector": {"kind": "TensorFlowEvent"},
                                           "source": {"fileSystemPath": {
                                               "kind": "Directory", "path": path}}},
                     **changes)
    return obj


def test_tfevent_spec_follows_katibs_defaults_and_webhook() -> None:
    obj = experiment(metricsCollectorSpec={"collector": {"kind": "TensorFlowEvent"}})
    spec = tuning_spec.parse(obj)
    assert spec.collector.path == "/var/log/katib/tfevent/"
    _defaults(obj, spec)
    assert obj["spec"]["metricsCollectorSpec"]["source"] == {
        "fileSystemPath": {"kind": "Directory", "path": "/var/log/katib/tfevent/"}}
    assert spec.parallel == 2 and "katib.collector.tfevent-parallel" in [
        r for r, _ in differences(spec)]
    bad = [({"kind": "File", "path": "/logs"}, "fileSystemPath"),
           ({"kind": "Directory", "path": "logs"}, "fileSystemPath.path"),
           ({"kind": "Directory", "path": "/logs", "format": "TEXT"}, "fileSystemPath.format")]
    for fsp, fld in bad:
        obj = experiment(metricsCollectorSpec={"collector": {"kind": "TensorFlowEvent"},
                                               "source": {"fileSystemPath": fsp}})
        with pytest.raises(InputError) as err:
            tuning_spec.parse(obj)
        assert err.value.field == f"spec.metricsCollectorSpec.source.{fld}", fsp
    obj = _tfevent_experiment("/logs", earlyStopping={"algorithmName": "medianstop"})
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert err.value.field == "spec.earlyStopping"


def test_tfevent_without_tensorboard_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorBoard is installed here; its absence is simulated (find_spec says None)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(InputError) as err:
        tuning_spec.parse(_tfevent_experiment("/logs"))
    assert re.search(r"install the tf extra: (cd \S+ && )?bash scripts/setup\.sh local,tf\b",
                     str(err.value)), str(err.value)


# A trial that writes TF2-style scalars for `accuracy` = x, x/2 (the objective is max x),
# into the folder it is given, counting the files it found there first.
WRITER = """
import sys, time, types
sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")
from tensorboard.compat.proto import event_pb2
from tensorboard.plugins.scalar import summary_v2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
import os
x, logdir = float(sys.argv[1].split("=")[1]), sys.argv[2]
print("found", len(os.listdir(logdir)))
w = EventFileWriter(logdir)
for step, v in enumerate((x / 2, x)):
    w.add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                summary=summary_v2.scalar_pb("accuracy", v)))
w.close()
"""


def _writer_experiment(logdir: Path) -> dict[str, Any]:
    obj = _tfevent_experiment(str(logdir), maxTrialCount=2, parallelTrialCount=2,
                              parameters=[{"name": "x", "parameterType": "double",
                                           "feasibleSpace": {"min": "0.1", "max": "0.9"}}])
    obj["spec"]["trialTemplate"]["trialParameters"] = [{"name": "x", "reference": "x"}]
    container(obj)["command"] = [sys.executable, "trial.py", "--x=${trialParameters.x}",
                                 str(logdir)]
    return obj


def test_tfevent_experiment_end_to_end(tmp_path: Path) -> None:
    """Each trial starts with the collector's folder empty (created when missing, as
    Katib's mount), runs one at a time (announced), and its observation is what its own
    event files hold; the stored Experiment carries Katib's defaults."""
    backend = LocalBackend(str(tmp_path / "state"))
    events: list[dict] = []
    backend.sink = events.append
    folder = tmp_path / "manifest"
    folder.mkdir()
    write(folder, "trial.py", WRITER)
    logdir = tmp_path / "logs" / "test"
    exp = backend.apply(_writer_experiment(logdir), base_dir=folder)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    assert exp["spec"]["metricsCollectorSpec"]["source"]["fileSystemPath"]["kind"] == \
        "Directory"
    trials = backend.list("Trial")
    assert len(trials) == 2
    for t in trials:
        x = float(t["spec"]["parameterAssignments"][0]["value"])
        acc = t["status"]["observation"]["metrics"][0]
        assert float(acc["max"]) == pytest.approx(x, rel=1e-6)
        assert float(acc["min"]) == pytest.approx(x / 2, rel=1e-6)
        assert list(backend.logs("Trial", t["metadata"]["name"])) == ["found 0"]
    assert any("katib.collector.tfevent-parallel" in str(e) or "one shared folder" in str(e)
               for e in events)
    # applied again: the files the last trial left are kflab's to remove, and only those
    backend.delete("Experiment", "exp")
    assert any(logdir.iterdir())
    obj = _writer_experiment(logdir)
    obj["spec"].update(maxTrialCount=1, parallelTrialCount=1, maxFailedTrialCount=1)
    again = backend.apply(obj, base_dir=folder)
    assert again["status"]["trialsSucceeded"] == 1
    (trial,) = backend.list("Trial")
    assert list(backend.logs("Trial", trial["metadata"]["name"])) == ["found 0"]


def test_tfevent_folder_with_foreign_files_fails_the_trial(tmp_path: Path) -> None:
    backend = LocalBackend(str(tmp_path / "state"))
    folder = tmp_path / "manifest"
    folder.mkdir()
    write(folder, "trial.py", WRITER)
    logdir = tmp_path / "theirs"
    logdir.mkdir()
    (logdir / "keep.txt").write_text("someone's\n")
    obj = _writer_experiment(logdir)
    obj["spec"]["maxFailedTrialCount"] = 1
    exp = backend.apply(obj, base_dir=folder)
    assert exp["status"]["conditions"][-1]["type"] == "Failed"
    message = backend.list("Trial")[0]["status"]["conditions"][-1]["message"]
    assert f"the TensorFlowEvent folder {logdir} holds files no trial wrote" in message
    assert (logdir / "keep.txt").read_text() == "someone's\n"
    backend.delete("Experiment", "exp")  # applied again: still not kflab's to remove
    again = backend.apply(obj, base_dir=folder)
    assert again["status"]["conditions"][-1]["type"] == "Failed"
    assert (logdir / "keep.txt").read_text() == "someone's\n"
