"""Metrics collection as Katib's StdOut/File collectors parse it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.backends.local.tuning.metrics import UNAVAILABLE, MetricLog, Tail, objective_value
from lab.backends.local.tuning.spec import DEFAULT_FILTER


def log(*names: str) -> MetricLog:
    return MetricLog(names, (DEFAULT_FILTER,))


def test_default_filter_reads_katib_number_forms() -> None:
    m = log("loss", "accuracy", "score")
    for line in ("loss=0.3", "accuracy=.98", "score = -7.53e-05", "epoch 2: loss=1E0 x=9",
                 "Validation-accuracy=0.5"):
        m.feed(line)
    assert m.values == {"loss": ["0.3", "1E0"], "accuracy": [".98"], "score": ["-7.53e-05"]}


def test_lines_without_a_declared_metric_are_ignored() -> None:
    m = log("loss")
    m.feed("lr=0.1 momentum=0.9")
    m.feed("loss=")  # no value: nothing recorded
    assert m.observation() is None


def test_observation_has_min_max_latest_and_unavailable() -> None:
    m = log("loss", "accuracy")
    for v in ("0.5", "0.2", "0.4"):
        m.feed(f"loss={v}")
    obs = m.observation()
    assert obs == {"metrics": [
        {"name": "loss", "min": "0.2", "max": "0.5", "latest": "0.4"},
        {"name": "accuracy", "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}]}
    assert objective_value(obs, "loss", "min") == "0.2"
    assert objective_value(obs, "loss", "latest") == "0.4"
    assert objective_value(obs, "accuracy", "max") == UNAVAILABLE


def test_custom_filter_and_json_format() -> None:
    m = MetricLog(("acc",), (r"(\w+):\s*([\d.]+)",))
    m.feed("epoch 1 acc: 0.71")
    m.feed('{"acc": "0.8", "timestamp": "2024-01-01T00:00:00Z"}', "JSON")
    m.feed('{"acc": 0.9}', "JSON")  # a number: Katib's JSON collector does not read it
    m.feed("", "JSON")  # empty lines are skipped
    m.feed("not json", "JSON")
    assert m.values["acc"] == ["0.71", "0.8"]
    assert m.unread == {"acc": 1}
    assert m.bad_line == (4, "not json")


def test_tail_returns_only_whole_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    tail = Tail(path)
    assert tail.read() == []
    path.write_text("a=1\nb=")
    assert tail.read() == ["a=1"]
    with open(path, "a") as fh:
        fh.write("2\n")
    assert tail.read() == ["b=2"]
    with open(path, "a") as fh:
        fh.write("last")
    assert tail.read(final=True) == ["last"]


def test_a_catastrophic_filter_cannot_hang_the_collector() -> None:
    """`(a+)+=(b)` backtracks exponentially in Python's re on a long line of a's; Katib's
    collector is Go (RE2, linear time), and so is ours: the line is read in milliseconds."""
    import time

    metrics = MetricLog(("loss",), (r"(\w+)\s*=\s*((a+)+b)",))
    line = "loss=" + "a" * 50_000 + "c"
    t0 = time.monotonic()
    metrics.feed(line)
    assert time.monotonic() - t0 < 1.0
    assert metrics.values["loss"] == []
    metrics.feed("loss=aab")
    assert metrics.values["loss"] == ["aab"]


@pytest.mark.parametrize("pattern", [r"(\w+)=(\d+)\1", r"(?=loss)(\w+)=(\d+)",
                                     r"(\w+)(?<!x)=(\d+)"])
def test_filters_a_go_regexp_refuses_are_refused_with_the_field(pattern: str) -> None:
    from tuning_helpers import experiment

    from lab.backends.local.tuning import spec as tuning_spec
    from lab.errors import InputError

    obj = experiment()
    obj["spec"]["metricsCollectorSpec"] = {"source": {"filter": {"metricsFormat": [pattern]}}}
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert err.value.field == "spec.metricsCollectorSpec.source.filter.metricsFormat[0]"
    assert "RE2" in str(err.value)


def test_a_near_miss_metric_name_is_suggested() -> None:
    """The objective is 'Accuracy', the trial printed accuracy=: the learner is asked
    "did you mean 'accuracy'?" (names reported, not collected, are remembered, bounded)."""
    m = log("Accuracy")
    m.feed("epoch 1: accuracy=0.91 loss=0.3")
    assert m.steps("Accuracy") == 0
    assert m.near("Accuracy") == "accuracy"
    assert m.near("f1") is None
    j = MetricLog(("acuracy",), (DEFAULT_FILTER,))
    j.feed('{"accuracy": "0.9"}', "JSON")
    assert j.near("acuracy") == "accuracy"
    for i in range(200):
        m.feed(f"m{i}=1")
    assert len(m.others) <= 50


def test_a_metrics_path_that_is_a_fifo_or_endless_never_stalls_the_trial(tmp_path) -> None:
    """The Experiment names the metrics file: a FIFO there is not read (a read would wait
    for ever), and a file is read at most READ_BYTES at a time, a line that never ends
    dropped once over MAX_LINE_BYTES."""
    import os

    from lab.backends.local.tuning import metrics

    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)
    assert metrics.Tail(fifo).read() == []
    big = tmp_path / "metrics.log"
    big.write_bytes(b"x" * (metrics.READ_BYTES + 10) + b"\nloss=0.5\n")
    tail = metrics.Tail(big)
    assert tail.read() == [] and tail.partial == b""  # the endless line is dropped
    assert tail.read() == ["loss=0.5"]
