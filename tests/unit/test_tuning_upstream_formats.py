"""The output formats of Katib's own trial image (examples/v1beta1/trial-images/pytorch-mnist,
mnist.py) through the StdOut and File (TEXT, JSON) collectors, as Katib v0.19 reads them.

The scripts here print what mnist.py prints, in the same layout, without the ML stack:
`logging` lines "<asctime> <LEVEL>    Train Epoch: E [i/N (p%)]<TAB>loss=L" and the test line
"{metricName: accuracy, metricValue: A};{metricName: loss, metricValue: L}" (to stderr, or
to --log-path), and cloudml-hypertune's JSON file (the whole file rewritten on each report,
string values, a float timestamp). Expected values follow Katib's parsers
(file-metricscollector.go parseLogsInTextFormat / parseLogsInJsonFormat) and the trial
controller's observation (trial_controller_util.go getMetrics: min, max, latest)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tuning_helpers import container, experiment, write

from lab.backends.local import LocalBackend

MNIST_LIKE = r'''
import argparse, json, logging, os, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--log-path", default="")
p.add_argument("--logger", default="standard")
a = p.parse_args()
kw = dict(format="%(asctime)s %(levelname)-8s %(message)s", datefmt="%Y-%m-%dT%H:%M:%SZ",
          level=logging.DEBUG)
if a.log_path and a.logger != "hypertune":
    kw["filename"] = a.log_path
logging.basicConfig(**kw)
reports = []
def hypertune(tag, value, step):
    reports.append({"timestamp": time.time(), "trial": "0", tag: str(value),
                    "global_step": str(step), "checkpoint_path": ""})
    with open(a.log_path, "w") as fh:  # cloudml-hypertune rewrites the whole file
        for r in reports:
            fh.write(json.dumps(r, sort_keys=True) + "\n")
for epoch in (1, 2):
    for i, loss in enumerate((2.3, 1.9)):
        loss = loss / epoch + a.lr
        logging.info("Train Epoch: {} [{}/64 ({:.0f}%)]\tloss={:.4f}".format(
            epoch, i * 32, 50.0 * i, loss))
    acc, test_loss = (4 + epoch) / 10, 1.5 / epoch
    logging.info("{{metricName: accuracy, metricValue: {:.4f}}};"
                 "{{metricName: loss, metricValue: {:.4f}}}\n".format(acc, test_loss))
    if a.logger == "hypertune":
        hypertune("loss", test_loss, epoch)
        hypertune("accuracy", acc, epoch)
'''

KATIB_FILTER = r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(str(tmp_path / "state"))


def _run(backend: LocalBackend, folder: Path, args: list[str], **spec: object) -> dict:
    obj = experiment(maxTrialCount=1, parallelTrialCount=1, maxFailedTrialCount=1,
                     parameters=[{"name": "lr", "parameterType": "double",
                                  "feasibleSpace": {"min": "0.01", "max": "0.011"}}],
                     **spec)
    obj["spec"]["trialTemplate"]["trialParameters"] = [{"name": "lr", "reference": "lr"}]
    container(obj)["command"] = [sys.executable, "mnist_like.py",
                                 "--lr=${trialParameters.lr}", *args]
    write(folder, "mnist_like.py", MNIST_LIKE)
    exp = backend.apply(obj, base_dir=folder)
    assert exp["status"]["conditions"][-1]["reason"] == "ExperimentMaxTrialsReached"
    return backend.list("Trial")[0]


def _metrics(trial: dict) -> dict[str, tuple[str, str, str]]:
    return {m["name"]: (m["min"], m["max"], m["latest"])
            for m in trial["status"]["observation"]["metrics"]}


def _lr(trial: dict) -> float:
    return float(trial["spec"]["parameterAssignments"][0]["value"])


def test_stdout_default_filter_reads_the_train_lines_only(backend: LocalBackend,
                                                          tmp_path: Path) -> None:
    """metrics-collection-strategy.yaml: objective loss (min), accuracy (max). The default
    filter (name=value) matches `loss=` in the train lines; the metricName line has no
    '=', so accuracy is never reported: Katib shows it "unavailable"."""
    trial = _run(backend, tmp_path, [], objective={
        "type": "minimize", "objectiveMetricName": "loss",
        "additionalMetricNames": ["accuracy"],
        "metricStrategies": [{"name": "accuracy", "value": "max"},
                             {"name": "loss", "value": "min"}]})
    lr = _lr(trial)
    losses = [f"{v + lr:.4f}" for v in (2.3, 1.9, 2.3 / 2, 1.9 / 2)]
    assert trial["status"]["conditions"][-1]["type"] == "Succeeded"
    assert _metrics(trial) == {
        "loss": (min(losses, key=float), max(losses, key=float), losses[-1]),
        "accuracy": ("unavailable", "unavailable", "unavailable")}


def test_file_text_with_katibs_filter_reads_the_test_lines(backend: LocalBackend,
                                                           tmp_path: Path) -> None:
    """file-metrics-collector.yaml: --log-path outside the manifest's folder (/katib on a
    cluster), Katib's metricName filter: one accuracy and one loss per epoch, as printed."""
    folder = tmp_path / "manifest"
    folder.mkdir()
    log = tmp_path / "katib" / "mnist.log"
    trial = _run(backend, folder, [f"--log-path={log}"], objective={
        "type": "maximize", "goal": 0.99, "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["loss"]}, metricsCollectorSpec={
        "source": {"filter": {"metricsFormat": [KATIB_FILTER]},
                   "fileSystemPath": {"path": str(log), "kind": "File"}},
        "collector": {"kind": "File"}})
    assert _metrics(trial) == {"accuracy": ("0.5000", "0.6000", "0.6000"),
                               "loss": ("0.7500", "1.5000", "0.7500")}


def test_file_json_from_hypertune_reads_string_values(backend: LocalBackend,
                                                      tmp_path: Path) -> None:
    """file-metrics-collector-with-json-format.yaml (--logger=hypertune): the file is
    rewritten whole at each report; Katib reads every line's string values."""
    folder = tmp_path / "manifest"
    folder.mkdir()
    path = tmp_path / "katib" / "mnist.json"
    trial = _run(backend, folder, [f"--log-path={path}", "--logger=hypertune"], objective={
        "type": "maximize", "goal": 0.99, "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["loss"]}, metricsCollectorSpec={
        "source": {"fileSystemPath": {"path": str(path), "kind": "File", "format": "JSON"}},
        "collector": {"kind": "File"}})
    assert _metrics(trial) == {"accuracy": ("0.5", "0.6", "0.6"),
                               "loss": ("0.75", "1.5", "0.75")}
