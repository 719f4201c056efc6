"""InferenceService parsing for local serving, the V1/V2 shapes, and the status schema.

Everything here is fast (no model server is started); test_serving_servers.py runs real ones.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from crds import crd_schema, schema_errors
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.backends.local import LocalBackend
from lab.backends.local.serving import handler as serving
from lab.backends.local.serving import runtimes
from lab.backends.local.serving import spec as serving_spec
from lab.errors import InputError, LabError
from lab.kube import inference

CRD_FILE = "upstream/kubeflow-manifests-26.03/applications/kserve/kserve/kserve.yaml"


def isvc(predictor: dict, name: str = "iris", **spec: object) -> dict:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"predictor": predictor, **spec}}


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "models" / "v1"
    d.mkdir(parents=True)
    (d / "model.joblib").write_bytes(b"not read by the parser")
    return d


def parse(obj: dict, base: Path, state: Path | None = None) -> serving_spec.ServingSpec:
    return serving_spec.parse(obj, base_dir=base, state=state or base / "state", file="f.yaml")


def test_model_format_shape_with_relative_file_uri(tmp_path: Path, model_dir: Path) -> None:
    spec = parse(isvc({"minReplicas": 2, "maxReplicas": 4, "model": {
        "modelFormat": {"name": "sklearn"}, "protocolVersion": "v2",
        "env": [{"name": "PREDICT_PROBA", "value": "true"}], "args": ["--enable_docs_url=True"],
        "storageUri": "file://models/v1"}}), tmp_path)
    assert spec.env == (("PREDICT_PROBA", "true"),)
    assert (spec.model_format, spec.protocol, spec.model_dir) == ("sklearn", "v2", model_dir)
    assert spec.ignored == ("spec.predictor.minReplicas", "spec.predictor.maxReplicas",
                            "spec.predictor.model.args")
    assert not spec.grpc


def test_legacy_framework_shape_absolute_path_and_grpc(tmp_path: Path, model_dir: Path) -> None:
    spec = parse(isvc({"xgboost": {"storageUri": str(model_dir),
                                   "protocolVersion": "grpc-v2"}}), tmp_path / "elsewhere")
    assert (spec.model_format, spec.model_dir, spec.grpc) == ("xgboost", model_dir, True)


@pytest.mark.parametrize(("predictor", "field", "words"), [
    ({"model": {"modelFormat": {"name": "onnx"}, "storageUri": "file://models/v1"}},
     "spec.predictor.model.modelFormat.name", "not served locally"),
    ({"model": {"storageUri": "file://models/v1"}},
     "spec.predictor.model.modelFormat.name", "missing"),
    ({"model": {"modelFormat": {"name": "sklearn"}}}, "spec.predictor.model.storageUri",
     "missing"),
    ({"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "file://nope"}},
     "spec.predictor.model.storageUri", "does not exist"),
    ({"model": {"modelFormat": {"name": "sklearn"}, "protocolVersion": "v3",
                "storageUri": "file://models/v1"}},
     "spec.predictor.model.protocolVersion", "unknown protocol"),
    ({"containers": [{"name": "kserve-container", "image": "x"}]},
     "spec.predictor.containers", "custom containers"),
    ({}, "spec.predictor.model", "missing"),
    # KServe's storage spec (issue 23, point 9): named as written, not "storageUri missing"
    ({"model": {"modelFormat": {"name": "sklearn"},
                "storage": {"key": "localMinIO", "path": "sklearn/model.joblib"}}},
     "spec.predictor.model.storage", "storage-config Secret"),
])
def test_bad_manifests_name_file_field_and_fix(tmp_path: Path, model_dir: Path,
                                               predictor: dict, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse(isvc(predictor), tmp_path)
    assert err.value.field == field and err.value.file == "f.yaml"
    assert words in err.value.problem and err.value.hint


@pytest.mark.parametrize("name", ["Iris", "1iris", "iris_", "a" * 64, "../x", "iris-"])
def test_bad_names_are_refused(tmp_path: Path, model_dir: Path, name: str) -> None:
    with pytest.raises(InputError) as err:
        parse(isvc({"sklearn": {"storageUri": "file://models/v1"}}, name=name), tmp_path)
    assert err.value.field == "metadata.name"


def test_transformer_is_refused(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(InputError, match=r"spec\.transformer"):
        parse(isvc({"sklearn": {"storageUri": "file://models/v1"}},
                   transformer={"containers": []}), tmp_path)


def test_remote_storage_says_what_to_do_then_uses_the_mirror(tmp_path: Path) -> None:
    uri = "gs://kfserving-examples/models/sklearn/1.0/model"
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "storageUri": uri}})
    state = tmp_path / "state"
    with pytest.raises(InputError) as err:
        parse(obj, tmp_path, state)
    assert "cannot be fetched in local mode" in err.value.problem
    mirror = state / "models" / "gs" / "kfserving-examples" / "models/sklearn/1.0/model"
    assert "file://" in str(err.value.hint) and str(mirror) in str(err.value.hint)
    mirror.mkdir(parents=True)
    (mirror / "model.joblib").write_bytes(b"x")
    assert parse(obj, tmp_path, state).model_dir == mirror


def test_a_remote_uri_cannot_climb_out_of_the_mirror(tmp_path: Path) -> None:
    outside = tmp_path / "victim"
    outside.mkdir()
    (outside / "model.joblib").write_bytes(b"x")
    state = tmp_path / "state"
    for uri in ("s3://../../../victim", "gs://bucket/../../../../victim",
                "s3://b/%2e%2e/%2e%2e/%2e%2e/%2e%2e/victim"):
        obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "storageUri": uri}})
        with pytest.raises(InputError) as err:
            parse(obj, tmp_path, state)
        assert "outside the model mirror" in err.value.problem, uri
        assert err.value.field.endswith("storageUri")


def test_kserve_servers_want_exactly_one_model_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no sklearn model file"):
        runtimes.model_file("kserve-sklearnserver", "sklearn", tmp_path)
    (tmp_path / "a.bst").write_bytes(b"x")
    assert runtimes.model_file("kserve-xgbserver", "xgboost", tmp_path).path.name == "a.bst"
    (tmp_path / "b.json").write_text("{}")
    with pytest.raises(ValueError, match="more than one"):
        runtimes.model_file("kserve-xgbserver", "xgboost", tmp_path)


# --- V1 / V2 shapes ------------------------------------------------------------------------

def test_v1_v2_conversion_round_trip_and_predictions() -> None:
    v1 = {"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}
    v2 = inference.to_protocol(v1, "v2")
    assert v2["inputs"][0]["shape"] == [2, 4] and v2["inputs"][0]["datatype"] == "FP64"
    assert inference.to_protocol(v2, "v1") == v1
    resp = {"outputs": [{"name": "output-0", "shape": [2, 3], "datatype": "FP32",
                         "data": [0.1, 0.8, 0.1, 0.2, 0.2, 0.6]}]}
    assert inference.predictions(resp) == [[0.1, 0.8, 0.1], [0.2, 0.2, 0.6]]
    assert inference.predictions({"predictions": [1, 2]}) == [1, 2]
    assert inference.close([1.0, 2.0], [1, 2]) and not inference.close([1, 2], [1, 2, 3])
    assert inference.close([[0.5]], [[0.52]], 0.05) and not inference.close([[0.5]], [[0.6]], 0.05)


def test_v1_inputs_columns_form_is_v1() -> None:
    """KServe's lightgbm sample body: V1's `inputs` (columns by name), sent to :predict."""
    body = {"inputs": [{"sepal_length_(cm)": [5.1], "sepal_width_(cm)": [3.5]}]}
    assert inference.detect(body) == "v1" and inference.to_protocol(body, "v1") == body
    assert inference.detect({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
                                         "data": [1.0]}]}) == "v2"
    with pytest.raises(LabError, match="--protocol v1"):
        inference.to_protocol(body, "v2")


def test_load_request_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "in.json"
    bad.write_text('{"instances": [\n  [1, 2,\n}')
    with pytest.raises(InputError) as err:
        inference.load_request(bad)
    assert err.value.file == str(bad) and err.value.line == 3
    bad.write_text('{"rows": [[1]]}')
    with pytest.raises(InputError, match="not a V1 or V2"):
        inference.load_request(bad)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.sampled_from(["model", "modelFormat", "name",
                                                       "storageUri", "sklearn", "xgboost",
                                                       "protocolVersion", "containers",
                                                       "minReplicas", "x"]), kids, max_size=4),
                    max_leaves=12))
def test_fuzz_parse_only_raises_input_errors(predictor: object) -> None:
    """Any predictor a user might write: parsed, or refused with an InputError; never a crash."""
    obj = isvc(predictor)  # type: ignore[arg-type]
    with contextlib.suppress(InputError):
        serving_spec.parse(obj, base_dir=Path("/nonexistent"), state=Path("/nonexistent/s"))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_request_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    f = tmp_path_factory.mktemp("req") / "in.json"
    f.write_text(text)
    try:
        body = inference.load_request(f)
    except InputError:
        return
    assert inference.detect(body) in ("v1", "v2")
    with contextlib.suppress(LabError):
        inference.to_protocol(body, "v2")


# --- status in KServe's shape, validated against the upstream CRD ---------------------------

@pytest.fixture
def isvc_schema(shared: Path) -> dict:
    return crd_schema(shared, "InferenceService")


def validate_isvc(schema: dict, obj: dict) -> None:
    errors = schema_errors(schema, obj)
    assert not errors, "\n".join(errors[:5])


def test_ready_failed_and_crashed_statuses_match_the_crd(tmp_path: Path, model_dir: Path,
                                                         isvc_schema: dict) -> None:
    backend = LocalBackend(str(tmp_path / "state"))
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "storageUri": str(model_dir)}})
    ready = serving._ready(backend, json.loads(json.dumps(obj)),
                           {"host": "127.0.0.1", "port": 12345, "grpc_port": 12346})
    validate_isvc(isvc_schema, ready)
    assert ready["status"]["components"]["predictor"]["grpcUrl"] == "grpc://127.0.0.1:12346"
    for reason, failure in (("ModelLoadFailed", "ModelLoadFailed"),
                            ("ServerExited", "RuntimeUnhealthy")):
        failed = serving._fail(backend, json.loads(json.dumps(ready)), reason, failure, "boom")
        validate_isvc(isvc_schema, failed)
        conds = {c["type"]: c for c in failed["status"]["conditions"]}
        assert conds["Ready"]["status"] == "False" and conds["Ready"]["message"] == "boom"
    # the validator does catch a wrong shape (so the passes above mean something)
    broken = json.loads(json.dumps(ready))
    broken["status"]["modelStatus"]["states"]["activeModelState"] = "Happy"
    with pytest.raises(AssertionError):
        validate_isvc(isvc_schema, broken)


def test_a_stale_status_update_never_overwrites_a_newer_deployment(tmp_path: Path) -> None:
    """Another kflab process may refresh an old copy while `apply` replaces the service."""
    backend = LocalBackend(str(tmp_path / "state"))
    old = isvc({"sklearn": {"storageUri": "file://m"}})
    old["metadata"]["uid"] = "old"
    new = json.loads(json.dumps(old))
    new["metadata"]["uid"] = "new"
    backend.store.put(new)
    serving._fail(backend, old, "ServerExited", "RuntimeUnhealthy", "stale")
    stored = backend.store.get("InferenceService", "iris")
    assert stored["metadata"]["uid"] == "new" and "status" not in stored
    serving._fail(backend, new, "ServerExited", "RuntimeUnhealthy", "current")
    stored = backend.store.get("InferenceService", "iris")
    ready = next(c for c in stored["status"]["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "current"


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=4),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.sampled_from(["predictions", "outputs", "inputs",
                                                       "instances", "data", "shape",
                                                       "datatype", "name"]), kids, max_size=4),
                    max_leaves=16)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_fuzz_bodies_and_responses_fail_only_with_lab_errors(body: object) -> None:
    """Saved responses (differ_from) and request files are user input: any JSON is either
    understood or refused with a LabError, never a crash."""
    for call in (lambda: inference.predictions(body),
                 lambda: inference.to_protocol(body, "v1"),  # type: ignore[arg-type]
                 lambda: inference.to_protocol(body, "v2")):  # type: ignore[arg-type]
        with contextlib.suppress(LabError):
            call()


def test_cli_apply_names_file_line_and_field(tmp_path: Path, kflab) -> None:
    manifest = tmp_path / "isvc.yaml"
    manifest.write_text("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
                        "metadata: {name: iris}\nspec:\n  predictor:\n    model:\n"
                        "      modelFormat: {name: sklearn}\n"
                        "      env:\n        - value: x\n      storageUri: file://.\n")
    out = kflab("apply", "-f", str(manifest), env={"KFLAB_STATE": str(tmp_path / "s")})
    assert out.returncode == 2
    assert f"{manifest}:9: field 'spec.predictor.model.env[0]': needs a name" in out.stderr
