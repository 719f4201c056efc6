"""docs/fidelity.md and the code read the same table (lab/backends/local/fidelity/rules.py):
the page is the table rendered, with the upstream examples' sweep from its stored results;
every DIFFERENT row is announced by the code for an example manifest (the handlers' own pure
functions decide); every REFUSED row is refused naming its field; every SAME row names a
test that exists and replays the upstream rule."""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tuning_helpers import container, experiment

from lab.backends.local import LocalBackend, fidelity
from lab.backends.local.fidelity import page
from lab.backends.local.notebooks import spec as notebook_spec
from lab.backends.local.serving import spec as serving_spec
from lab.backends.local.serving.handler import differences as serving_differences
from lab.backends.local.training import kinds as training_kinds
from lab.backends.local.training.handler import cluster_fields
from lab.backends.local.tuning import spec as tuning_spec
from lab.backends.local.tuning.differences import differences as tuning_differences
from lab.errors import LabError

REPO = Path(__file__).resolve().parents[2]


def tuning(**changes: Any) -> Callable[[Path], list[str]]:
    def found(tmp: Path) -> list[str]:
        obj = experiment(**changes)
        return [rule for rule, _ in tuning_differences(tuning_spec.parse(obj))]
    return found


def pytorch(extra: dict[str, Any]) -> dict:
    c = {"name": "pytorch", "command": ["python", "train.py"], **extra}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {
                "containers": [c]}}}}}}


def tfjob(extra: dict[str, Any], replicas: int = 2) -> dict:
    c = {"name": "tensorflow", "command": ["python", "train.py"], **extra}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": replicas, "template": {
                "spec": {"containers": [c]}}}}}}


def notebook(**container: Any) -> dict:
    c = {"name": "nb", "image": "jupyter-scipy:v1.10.0", **container}
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": "nb", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [c]}}}}


def notebooks(**container: Any) -> Callable[[Path], list[str]]:
    def found(tmp: Path) -> list[str]:
        return [rule for rule, _ in notebook_spec.differences(
            notebook_spec.parse(notebook(**container)))]
    return found


def _tfjob_found(obj: dict) -> list[str]:
    job = training_kinds.parse(obj)
    rules = [rule for rule, _ in job.flavor.differences(job)]
    return rules + (["tfjob.cluster-fields"] if cluster_fields(obj, job) else [])


def isvc(model: dict, **spec: Any) -> dict:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris", "namespace": "default"},
            "spec": {"predictor": {"model": {"storageUri": "file://m", **model},
                                   **spec.pop("predictor", {})}, **spec}}


def serving(model: dict, **spec: Any) -> Callable[[Path], list[str]]:
    def found(tmp: Path) -> list[str]:
        (tmp / "m").mkdir(exist_ok=True)
        (tmp / "m" / "model.joblib").write_bytes(b"x")
        parsed = serving_spec.parse(isvc(model, **spec), base_dir=tmp, state=tmp / "state")
        return [rule for rule, _ in serving_differences(parsed)]
    return found


def _pytorch_fields(tmp: Path) -> list[str]:
    obj = pytorch({"image": "pytorch/pytorch:2"})
    return ["pytorch.cluster-fields"] if cluster_fields(obj, training_kinds.parse(obj)) else []


# DIFFERENT rows: an example the code announces the row for
ANNOUNCED: dict[str, Callable[[Path], list[str]]] = {
    "katib.grid.end": tuning(algorithm={"algorithmName": "grid"}, maxTrialCount=None,
                             parameters=[{"name": "x", "parameterType": "discrete",
                                          "feasibleSpace": {"list": ["1", "2"]}},
                                         {"name": "n", "parameterType": "int",
                                          "feasibleSpace": {"min": "1", "max": "2"}}]),
    "katib.algorithm.hyperopt": tuning(algorithm={"algorithmName": "tpe"}),
    "katib.algorithm.goptuna": tuning(algorithm={"algorithmName": "sobol"}),
    "katib.algorithm.skopt": tuning(algorithm={"algorithmName": "bayesianoptimization"}),
    "katib.cmaes.restart_strategy": tuning(algorithm={
        "algorithmName": "cmaes", "algorithmSettings": [
            {"name": "restart_strategy", "value": "bipop"}]}),
    "katib.collector.file-parallel": tuning(parallelTrialCount=2, metricsCollectorSpec={
        "collector": {"kind": "File"},
        "source": {"fileSystemPath": {"path": "m.log", "kind": "File"}}}),
    "katib.collector.tfevent-parallel": tuning(parallelTrialCount=2, metricsCollectorSpec={
        "collector": {"kind": "TensorFlowEvent"}}),
    "katib.trialTemplate.cluster-fields": tuning(),  # the helper's container has an image
    "pytorch.cluster-fields": _pytorch_fields,
    "tfjob.ports": lambda tmp: _tfjob_found(tfjob({})),
    "tfjob.cluster-fields": lambda tmp: _tfjob_found(tfjob({"image": "tensorflow/tensorflow:2"})),
    "notebook.image": notebooks(),
    "notebook.cpu": notebooks(resources={"limits": {"cpu": "1500m"}}),
    "notebook.cluster-fields": notebooks(volumeMounts=[{"name": "v", "mountPath": "/w"}]),
    "kserve.runtime.mlserver": serving({"modelFormat": {"name": "sklearn"},
                                        "protocolVersion": "v2"}),
    "kserve.protocol.grpc": serving({"modelFormat": {"name": "sklearn"},
                                     "protocolVersion": "grpc-v2"}),
    "kserve.cluster-fields": serving({"modelFormat": {"name": "sklearn"}},
                                     predictor={"minReplicas": 2}),
}


def _no_command() -> dict:
    obj = experiment()
    container(obj)["args"] = container(obj).pop("command")[2:]  # the image would run them
    return obj


def _valuefrom() -> dict:
    return pytorch({"env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s"}}}]})


def _pytorch_no_command() -> dict:
    obj = pytorch({})
    del obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"]
    return obj


def _with_configmap() -> dict:
    obj = experiment()
    obj["spec"]["trialTemplate"]["configMap"] = {"configMapName": "t"}
    return obj


def _trial_kind(kind: str) -> dict:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialSpec"].update(kind=kind, apiVersion="kubeflow.org/v1")
    return obj


def _refuse_isvc(obj: dict) -> Callable[[Path], Any]:
    def run(tmp: Path) -> Any:
        (tmp / "m").mkdir(exist_ok=True)
        (tmp / "m" / "model.bst").write_bytes(b"x")
        return serving_spec.parse(obj, base_dir=tmp, state=tmp / "state")
    return run


def _unbounded(tmp: Path) -> Any:
    return LocalBackend(str(tmp / "state")).apply(experiment(maxTrialCount=None), base_dir=tmp)


# REFUSED rows: an example the code refuses, naming the row's field
REFUSED: dict[str, Callable[[Path], Any]] = {
    "katib.algorithm.nas": lambda tmp: tuning_spec.parse(
        experiment(algorithm={"algorithmName": "enas"})),
    "katib.algorithm.pbt": lambda tmp: tuning_spec.parse(
        experiment(algorithm={"algorithmName": "pbt"})),
    "katib.collector.custom": lambda tmp: tuning_spec.parse(
        experiment(metricsCollectorSpec={"collector": {"kind": "Custom"}})),
    "katib.collector.tfevent-earlystop": lambda tmp: tuning_spec.parse(experiment(
        metricsCollectorSpec={"collector": {"kind": "TensorFlowEvent"}},
        earlyStopping={"algorithmName": "medianstop"})),
    "katib.collector.others": lambda tmp: tuning_spec.parse(
        experiment(metricsCollectorSpec={"collector": {"kind": "Prometheus"}})),
    "katib.trialTemplate.command": lambda tmp: tuning_spec.parse(_no_command()),
    "katib.trialTemplate.configMap": lambda tmp: tuning_spec.parse(_with_configmap()),
    "katib.trialSpec.kind": lambda tmp: tuning_spec.parse(_trial_kind("MPIJob")),
    "katib.maxTrialCount.required": _unbounded,
    # a container without an image runs as a process, which needs the command
    "pytorch.command": lambda tmp: LocalBackend(str(tmp / "state")).validate(
        _pytorch_no_command(), base_dir=tmp),
    "pytorch.valueFrom": lambda tmp: training_kinds.parse(_valuefrom()),
    "tfjob.command": lambda tmp: LocalBackend(str(tmp / "state")).validate(
        tfjob({"command": None}), base_dir=tmp),
    "tfjob.valueFrom": lambda tmp: training_kinds.parse(tfjob({"env": [
        {"name": "K", "valueFrom": {"secretKeyRef": {"name": "s"}}}]})),
    "notebook.gpus": lambda tmp: LocalBackend(str(tmp / "state")).validate(
        notebook(resources={"limits": {"nvidia.com/gpu": 4096}}), base_dir=tmp),
    "kserve.runtime.none": _refuse_isvc(isvc({"modelFormat": {"name": "xgboost",
                                                              "version": "2"}})),
    "kserve.storage-spec": _refuse_isvc(isvc({"modelFormat": {"name": "xgboost"},
                                              "storage": {"key": "k", "path": "m"},
                                              "storageUri": None})),
    "kserve.components": _refuse_isvc(isvc({"modelFormat": {"name": "xgboost"}},
                                           transformer={"containers": []})),
}


SWEEP = REPO / "docs" / "fidelity"


def _stored() -> tuple[dict, dict]:
    return (json.loads((SWEEP / "listing.json").read_text()),
            json.loads((SWEEP / "results.json").read_text()))


def test_the_page_is_the_table_and_the_sweep() -> None:
    listing, results = _stored()
    assert (REPO / "docs" / "fidelity.md").read_text() == page.render(listing, results), \
        "docs/fidelity.md is stale: python scripts/fidelity_sweep.py render"


def test_the_results_cover_every_listed_example_in_both_columns() -> None:
    """The listing is every example file of the pinned trees (scripts/fidelity_sweep.py
    `list`); a skipped example, or one run in one column only, shows here."""
    listing, results = _stored()
    per_tree = {t: sum(1 for k in listing["files"] if k.startswith(t + "/"))
                for t in listing["trees"]}
    # every file of each pinned folder, not a selection (v0.19.0, v1.9.2, v0.16.0, 2.16.0)
    assert per_tree["katib"] == 33 and per_tree["training-operator"] == 31
    assert per_tree["kserve"] == 71 and per_tree["notebooks"] == 3
    assert per_tree["pipelines"] >= 20
    ran = results["examples"]
    missing = [(key, col) for key in listing["files"] for col in page.COLUMNS
               if col not in ran.get(key, {})]
    assert missing == []
    extra = sorted(set(ran) - set(listing["files"]))
    assert extra == []  # results of files the listing no longer has
    for key, entry in ran.items():
        for col, res in entry.items():
            assert res["verdict"] in page.VERDICTS and res["reason"], (key, col)


def test_the_counts_the_page_quotes_are_counted() -> None:
    """Every count is computed from the results: changing one verdict changes the page."""
    listing, results = _stored()
    key = next(iter(listing["files"]))
    before = page.render(listing, results)
    changed = json.loads(json.dumps(results))
    old = changed["examples"][key]["none"]["verdict"]
    changed["examples"][key]["none"]["verdict"] = "wrong" if old != "wrong" else "exact"
    after = page.render(listing, changed)
    assert before != after
    n = page.counts(listing, changed, "none")
    assert f"{n['wrong']} wrong" in after


def test_rows_are_well_formed() -> None:
    assert len(fidelity.BY_ID) == len(fidelity.RULES)
    for rule in fidelity.RULES:
        assert rule.kind in fidelity.KINDS and rule.local in (fidelity.SAME, fidelity.DIFFERENT,
                                                              fidelity.REFUSED)
        assert rule.source and rule.upstream and rule.detail
        assert bool(rule.announce) == (rule.local == fidelity.DIFFERENT), rule.id
        assert bool(rule.field) == (rule.local == fidelity.REFUSED), rule.id
        if rule.local == fidelity.SAME:
            assert rule.test, rule.id


def _test_names() -> set[str]:
    names = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def test_named_tests_exist() -> None:
    names = _test_names()
    missing = [(r.id, r.test) for r in fidelity.RULES if r.test and r.test not in names]
    assert missing == []


@pytest.mark.parametrize("rule", [r for r in fidelity.RULES if r.local == fidelity.DIFFERENT],
                         ids=lambda r: r.id)
def test_different_rows_are_announced(rule: fidelity.Rule, tmp_path: Path) -> None:
    if rule.id not in ANNOUNCED:  # needs real processes: its named test asserts the event
        assert rule.test in _test_names(), f"{rule.id}: no example and no test"
        return
    assert rule.id in ANNOUNCED[rule.id](tmp_path)
    values = {key: "X" for key in ("algorithm", "value", "size", "parallel", "fields", "format",
                                   "file", "url", "port")}
    assert fidelity.text(rule.id, values).startswith("note: ")


@pytest.mark.parametrize("rule", [r for r in fidelity.RULES if r.local == fidelity.REFUSED],
                         ids=lambda r: r.id)
def test_refused_rows_are_refused_naming_the_field(rule: fidelity.Rule, tmp_path: Path) -> None:
    with pytest.raises(LabError) as err:
        REFUSED[rule.id](tmp_path)
    named = getattr(err.value, "field", None) or str(err.value)
    assert rule.field in named or named.startswith(rule.field), (rule.field, str(err.value))


def test_announce_records_the_rules_on_the_object() -> None:
    events: list[dict] = []

    class Sink:
        def emit(self, event: dict) -> None:
            events.append(event)

    obj: dict = {"metadata": {}}
    fidelity.announce(Sink(), obj, [("katib.grid.end", {"size": "12"}),
                                    ("katib.grid.end", {"size": "12"})])
    assert obj["metadata"]["annotations"][fidelity.ANNOTATION] == "katib.grid.end"
    assert "maxTrialCount: 12" in events[0]["text"] and events[0]["rule"] == "katib.grid.end"
    assert copy.deepcopy(events[0]) == events[1]
