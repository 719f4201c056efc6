"""Experiment validation: bad input gets an InputError naming the field; the loader never
crashes on arbitrary input (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tuning_helpers import container, experiment

from lab.backends.local.tuning import grid
from lab.backends.local.tuning import spec as tuning_spec
from lab.errors import InputError


def field_of(obj: dict[str, Any]) -> str:
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert err.value.file == "experiment 'exp'"
    return str(err.value.field)


def test_valid_experiment_parses_with_defaults_and_one_cluster_warning() -> None:
    spec = tuning_spec.parse(experiment())
    assert spec.algorithm == "random" and spec.parallel == 2 and spec.max_trials == 4
    assert spec.objective.strategies == {"loss": "min"}
    assert spec.collector.filters == (tuning_spec.DEFAULT_FILTER,)
    assert [p.name for p in spec.params] == ["x", "n"]
    assert spec.container["name"] == "training-container"
    # image is a cluster-only field: listed, never silently dropped
    assert any("image" in w for w in spec.warnings)
    assert any("spec.template.spec.restartPolicy" in w for w in spec.warnings)


def test_job_and_pod_fields_beside_the_container_are_listed() -> None:
    obj = experiment()
    job = obj["spec"]["trialTemplate"]["trialSpec"]["spec"]
    job["backoffLimit"] = 2
    job["template"]["spec"]["volumes"] = [{"name": "data"}]
    text = "; ".join(tuning_spec.parse(obj).warnings)
    for fld in ("spec.backoffLimit", "spec.template.spec.volumes",
                "spec.template.spec.restartPolicy"):
        assert fld in text


@pytest.mark.parametrize(("change", "field"), [
    ({"parallelTrialCount": "two"}, "spec.parallelTrialCount"),
    ({"maxTrialCount": 0}, "spec.maxTrialCount"),
    ({"maxFailedTrialCount": True}, "spec.maxFailedTrialCount"),
    ({"objective": {"type": "minimise", "objectiveMetricName": "loss"}}, "spec.objective.type"),
    ({"objective": {"type": "minimize"}}, "spec.objective.objectiveMetricName"),
    ({"objective": {"type": "minimize", "objectiveMetricName": "loss",
                    "metricStrategies": [{"name": "acc", "value": "max"}]}},
     "spec.objective.metricStrategies[0].name"),
    ({"objective": {"type": "minimize", "objectiveMetricName": "loss",
                    "additionalMetricNames": ["loss"]}},
     "spec.objective.additionalMetricNames[0]"),
    ({"algorithm": {"algorithmName": "annealing"}}, "spec.algorithm.algorithmName"),
    ({"algorithm": {"algorithmName": "pbt"}}, "spec.algorithm.algorithmName"),
    ({"algorithm": {"algorithmName": "hyperband"}}, "spec.algorithm.algorithmSettings"),
    ({"algorithm": {"algorithmName": "tpe",
                    "algorithmSettings": [{"name": "n_startup", "value": "3"}]}},
     "spec.algorithm.algorithmSettings[0].name"),
    ({"algorithm": {"algorithmName": "cmaes"},
      "parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "0", "max": "1"}},
                     {"name": "n", "parameterType": "categorical",
                      "feasibleSpace": {"list": ["1", "2"]}}]}, "spec.parameters"),
    ({"parameters": []}, "spec.parameters"),
    ({"parameters": [{"name": "x", "parameterType": "float",
                      "feasibleSpace": {"min": "0", "max": "1"}}]},
     "spec.parameters[0].parameterType"),
    ({"parameters": [{"name": "x", "parameterType": "categorical",
                      "feasibleSpace": {"list": []}}]}, "spec.parameters[0].feasibleSpace.list"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "2", "max": "1"}}]},
     "spec.parameters[0].feasibleSpace"),
    ({"parameters": [{"name": "x", "parameterType": "int",
                      "feasibleSpace": {"min": "0.5", "max": "3"}}]},
     "spec.parameters[0].feasibleSpace.min"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "0"}}]}, "spec.parameters[0].feasibleSpace.max"),
    ({"metricsCollectorSpec": {"collector": {"kind": "Prometheus"}}},
     "spec.metricsCollectorSpec.collector.kind"),
    ({"metricsCollectorSpec": {"collector": {"kind": "TensorFlowEvent"}, "source": {
        "fileSystemPath": {"kind": "Directory", "path": "logs"}}}},
     "spec.metricsCollectorSpec.source.fileSystemPath.path"),
    ({"metricsCollectorSpec": {"collector": {"kind": "File"}}},
     "spec.metricsCollectorSpec.source.fileSystemPath"),
    ({"earlyStopping": {"algorithmName": "hyperband"}}, "spec.earlyStopping.algorithmName"),
    ({"maxTrialCount": 2, "maxFailedTrialCount": 3}, "spec.maxFailedTrialCount"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "0", "max": "1", "distribution": "gaussian"}}]},
     "spec.parameters[0].feasibleSpace.distribution"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "0", "max": "1", "distribution": "logUniform"}}]},
     "spec.parameters[0].feasibleSpace.min"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": "0", "max": "1", "list": ["0.5"]}}]},
     "spec.parameters[0].feasibleSpace.list"),
    ({"parameters": [{"name": "x", "parameterType": "categorical",
                      "feasibleSpace": {"list": ["a"], "step": "1"}}]},
     "spec.parameters[0].feasibleSpace.step"),
    # Katib's CRD types these as strings: the API server refuses a YAML number
    ({"algorithm": {"algorithmName": "random",
                    "algorithmSettings": [{"name": "random_state", "value": 3}]}},
     "spec.algorithm.algorithmSettings[0].value"),
    ({"earlyStopping": {"algorithmName": "medianstop",
                        "algorithmSettings": [{"name": "start_step", "value": 2}]}},
     "spec.earlyStopping.algorithmSettings[0].value"),
    ({"parameters": [{"name": "x", "parameterType": "double",
                      "feasibleSpace": {"min": 0, "max": "1"}}]},
     "spec.parameters[0].feasibleSpace.min"),
    ({"parameters": [{"name": "x", "parameterType": "categorical",
                      "feasibleSpace": {"list": ["a", 2]}}]},
     "spec.parameters[0].feasibleSpace.list[1]"),
])
def test_malformed_experiment_names_the_field(change: dict[str, Any], field: str) -> None:
    obj = experiment(**change)
    if "parameters" in change:  # keep the template consistent with the new parameters
        names = [p["name"] for p in change["parameters"] if isinstance(p, dict)]
        obj["spec"]["trialTemplate"]["trialParameters"] = [
            {"name": n, "reference": n} for n in names]
        container(obj)["command"] = ["python3", "trial.py"] + [
            f"--{n}=${{trialParameters.{n}}}" for n in names]
    assert field_of(obj) == field


def test_pbt_refusal_says_why_and_what_to_do() -> None:
    with pytest.raises(InputError) as err:
        tuning_spec.parse(experiment(algorithm={"algorithmName": "pbt"}))
    assert "not supported on the local backend" in str(err.value)
    assert "suggestion_trial_dir" in str(err.value) and "medianstop" in str(err.value)


def test_custom_collector_refusal_says_katib_reads_no_stdout() -> None:
    with pytest.raises(InputError) as err:
        tuning_spec.parse(experiment(metricsCollectorSpec={"collector": {
            "kind": "Custom", "customCollector": {"name": "c", "image": "i"}}}))
    assert "spec.metricsCollectorSpec.collector.kind" in str(err.value)
    assert "katib-db-manager" in str(err.value) and "StdOut" in str(err.value)


def test_template_placeholder_must_be_declared() -> None:
    obj = experiment()
    container(obj)["args"] = ["--lr=${trialParameters.learningRate}"]
    assert field_of(obj) == "spec.trialTemplate.trialSpec"


def test_unused_or_doubly_referenced_trial_parameters_are_refused() -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialParameters"].append({"name": "lr", "reference": "x"})
    assert field_of(obj) == "spec.trialTemplate.trialParameters[2].reference"
    obj["spec"]["trialTemplate"]["trialParameters"][2]["reference"] = "${trialSpec.Name}"
    assert field_of(obj) == "spec.trialTemplate.trialParameters[2].name"  # never used


def test_log_uniform_maps_to_an_optuna_log_scale() -> None:
    from lab.backends.local.tuning.search import distribution_notes, distributions

    obj = experiment(parameters=[
        {"name": "x", "parameterType": "double",
         "feasibleSpace": {"min": "0.001", "max": "1", "distribution": "logUniform"}},
        {"name": "n", "parameterType": "int",
         "feasibleSpace": {"min": "1", "max": "64", "distribution": "logNormal"}}])
    spec = tuning_spec.parse(obj)
    dists = distributions(spec.params)
    assert dists["x"].log and dists["n"].log
    notes = distribution_notes(spec.params, "tpe")
    assert len(notes) == 1 and "logNormal" in notes[0]


def test_trial_parameter_reference_must_exist() -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialParameters"][0]["reference"] = "lr"
    assert field_of(obj) == "spec.trialTemplate.trialParameters[0].reference"


def test_container_without_command_is_refused_locally() -> None:
    obj = experiment()
    c = container(obj)
    c["args"] = c.pop("command")[2:]  # parameters still used, but no command
    assert field_of(obj).endswith("containers[0].command")


def test_primary_container_chosen_by_name_and_others_warned() -> None:
    obj = experiment()
    pod = obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    pod["containers"].insert(0, {"name": "sidecar", "command": ["sleep", "1"]})
    spec = tuning_spec.parse(obj)
    assert spec.container["name"] == "training-container"
    assert any("only the primary container" in w for w in spec.warnings)


def test_grid_needs_steps_and_checks_max_trials_against_its_size() -> None:
    obj = experiment(algorithm={"algorithmName": "grid"})
    assert field_of(obj) == "spec.parameters[0].feasibleSpace.step"
    obj["spec"]["parameters"][0]["feasibleSpace"]["step"] = "0.5"  # 0, 0.5, 1 x n 1..3
    obj["spec"]["maxTrialCount"] = 10
    assert field_of(obj) == "spec.maxTrialCount"
    obj["spec"]["maxTrialCount"] = 9
    spec = tuning_spec.parse(obj)
    assert grid.values(spec.params[0]) == ["0.0", "0.5", "1.0"]
    assert grid.size(spec.params) == len(grid.KatibGrid(spec.params, 0)) == 9


def test_double_grid_values_are_spelled_as_katib_spells_them() -> None:
    """numpy.arange(min, max + step, step), last value dropped if above max, str() of each:
    what Katib's grid writes into parameterAssignments and passes to the trainer."""
    p = tuning_spec.Param("lr", "double", 0.1, 0.3, 0.1)
    assert grid.values(p) == ["0.1", "0.2", "0.30000000000000004"]
    assert grid.count(p) == 3


# --- fuzzing ------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(paths(v, (*prefix, i)))
    return out


ALL_PATHS = [p for p in paths(experiment()["spec"]) if p]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), values), min_size=1, max_size=3))
def test_fuzzed_experiments_parse_or_raise_input_error(mutations: list) -> None:
    obj = experiment()
    for path, value in mutations:
        node: Any = obj["spec"]
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        spec = tuning_spec.parse(obj)
    except InputError as exc:
        assert exc.field, f"error without a field: {exc}"
    else:
        assert spec.params and spec.parallel >= 1


@settings(max_examples=200, deadline=None)
@given(values)
def test_fuzzed_whole_spec_never_crashes(spec: Any) -> None:
    obj = experiment()
    obj["spec"] = spec
    with pytest.raises(InputError):
        tuning_spec.parse(obj)


def test_field_errors_point_at_the_manifest_file_and_line(tmp_path) -> None:
    """`kflab apply` path: an Experiment field error names the YAML file and line."""
    import yaml

    from lab.kube.manifests import apply_document, load_manifests
    from lab.yamlio import dotted, undotted

    assert undotted("spec.parameters[0].feasibleSpace.list") == (
        "spec", "parameters", 0, "feasibleSpace", "list")
    assert dotted(undotted("a.b[3].c")) == "a.b[3].c"
    obj = experiment()
    obj["spec"]["parameters"][1]["feasibleSpace"] = {"list": []}
    obj["spec"]["parameters"][1]["parameterType"] = "categorical"
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    doc = load_manifests(path)[0]

    from lab.backends.local import LocalBackend

    with pytest.raises(InputError) as err:
        apply_document(LocalBackend(str(tmp_path / "state")), doc, tmp_path)
    assert err.value.file == str(path)
    assert err.value.field == "spec.parameters[1].feasibleSpace.list"
    line = path.read_text().splitlines()[err.value.line - 1]
    assert line.strip().startswith("list:")


def test_a_number_where_katib_takes_a_string_says_so() -> None:
    obj = experiment(algorithm={"algorithmName": "random", "algorithmSettings": [
        {"name": "random_state", "value": 3}]})
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert "must be of type string" in str(err.value) and 'quote it: "3"' in str(err.value)


def test_a_trial_kind_with_its_own_controller_is_named() -> None:
    """Katib's Argo Workflow, Tekton PipelineRun and MPIJob trials: refused naming the
    kind, not "no containers found"."""
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialSpec"] = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "spec": {"entrypoint": "e", "templates": [
            {"name": "e", "script": {"command": ["python"], "source": "${trialParameters.x} "
                                                                       "${trialParameters.n}"}}]}}
    with pytest.raises(InputError) as err:
        tuning_spec.parse(obj)
    assert err.value.field == "spec.trialTemplate.trialSpec.kind"
    assert "a trial of kind Workflow (argoproj.io/v1alpha1) needs its own controller" \
        in str(err.value)
