"""KServe rules replayed against upstream (no server is started here; the rollout runs real
servers in tests/integration/test_serving_rollout.py).

The runtime table is checked against the ClusterServingRuntimes of the kubeflow/manifests
copy in ../shared, so the selection replays KServe's own priorities.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lab.backends.local.serving import runtimes
from lab.backends.local.serving import spec as serving_spec
from lab.backends.local.serving.handler import differences
from lab.errors import InputError

RUNTIMES_FILE = ("upstream/kubeflow-manifests-26.03/applications/kserve/kserve/"
                 "kserve-cluster-resources.yaml")


def test_runtime_table_is_the_installed_one(shared: Path) -> None:
    upstream = {}
    for doc in yaml.safe_load_all((shared / RUNTIMES_FILE).read_text()):
        if doc and doc.get("kind") == "ClusterServingRuntime":
            spec = doc["spec"]
            upstream[doc["metadata"]["name"]] = (
                tuple(spec.get("protocolVersions") or ()),
                tuple((f["name"], f.get("version"), bool(f.get("autoSelect")), f.get("priority"))
                      for f in spec.get("supportedModelFormats") or ()),
                "workerSpec" in spec)
    ours = {rt.name: (rt.protocols, tuple((f.name, f.version, f.auto_select, f.priority)
                                          for f in rt.formats), rt.multinode)
            for rt in runtimes.RUNTIMES}
    assert ours == upstream


@pytest.mark.parametrize(("fmt", "version", "protocol", "runtime", "want"), [
    ("sklearn", None, None, None, "kserve-sklearnserver"),   # protocol defaults to v1
    ("sklearn", None, "v2", None, "kserve-mlserver"),         # priority 2 beats 1
    ("xgboost", None, "v1", None, "kserve-xgbserver"),
    ("xgboost", None, "v2", None, "kserve-mlserver"),
    ("xgboost", "2", "v2", None, "kserve-mlserver"),          # only MLServer lists xgboost 2
    ("xgboost", None, "v2", "kserve-xgbserver", "kserve-xgbserver"),  # explicit runtime
    ("onnx", None, "v2", None, "kserve-tritonserver"),
    ("pytorch", None, "v1", None, "kserve-torchserve"),
    # triton lists pytorch without autoSelect: only chosen when named
    ("pytorch", None, "v2", "kserve-tritonserver", "kserve-tritonserver"),
])
def test_runtime_selection_matches_kserve(fmt: str, version: str | None, protocol: str | None,
                                          runtime: str | None, want: str) -> None:
    assert runtimes.choose(fmt, version, protocol, runtime) == want


@pytest.mark.parametrize(("fmt", "version", "protocol", "runtime", "words"), [
    ("sklearn", None, "grpc-v2", None, "No runtime found"),
    ("xgboost", "2", "v1", None, "No runtime found"),
    ("sklearn", None, "v1", "kserve-mlserver", "does not support specified protocol"),
    ("sklearn", None, "v1", "kserve-xgbserver", "does not support specified framework"),
    ("lightgbm", None, "grpc-v2", None, "No runtime found"),
])
def test_no_runtime_is_kserves_error(fmt: str, version: str | None, protocol: str,
                                     runtime: str | None, words: str) -> None:
    with pytest.raises(runtimes.NoRuntime, match=words):
        runtimes.choose(fmt, version, protocol, runtime)


def put(folder: Path, *names: str, settings: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"x")
    if settings is not None:
        (folder / runtimes.SETTINGS_FILE).write_text(json.dumps(settings))
    return folder


def test_model_files_per_runtime(tmp_path: Path) -> None:
    """KServe's xgboost sample layout (model.bst beside model-settings.json): MLServer
    loads it; xgbserver refuses it, as upstream (the settings file ends in .json)."""
    sample = put(tmp_path / "iris", "model.bst", settings={
        "name": "xgboost-iris", "implementation": "mlserver_xgboost.XGBoostModel"})
    found = runtimes.model_file("kserve-mlserver", "xgboost", sample)
    assert found.path == sample / "model.bst" and found.name == "xgboost-iris"
    with pytest.raises(ValueError, match="more than one model file"):
        runtimes.model_file("kserve-xgbserver", "xgboost", sample)
    # parameters.uri wins, relative to the settings file
    other = put(tmp_path / "uri", "booster.bst", settings={"parameters": {"uri": "./booster.bst"}})
    assert runtimes.model_file("kserve-mlserver", "xgboost", other).path == other / "booster.bst"
    # without settings MLServer only knows its well-known names; KServe's server takes any
    odd = put(tmp_path / "odd", "booster.bst")
    with pytest.raises(FileNotFoundError, match=r"model\.bst / model\.json / model\.ubj"):
        runtimes.model_file("kserve-mlserver", "xgboost", odd)
    assert runtimes.model_file("kserve-xgbserver", "xgboost", odd).path.name == "booster.bst"
    sk = put(tmp_path / "sk", "model.pkl", "notes.txt")
    assert runtimes.model_file("kserve-mlserver", "sklearn", sk).path.name == "model.pkl"
    wrong = put(tmp_path / "wrong", "model.bst",
                settings={"implementation": "mlserver_sklearn.SKLearnModel"})
    with pytest.raises(ValueError, match="not MLServer's xgboost runtime"):
        runtimes.model_file("kserve-mlserver", "xgboost", wrong)
    # KServe's own sample names a class MLServer 1.5 cannot import: said so, with the fix
    sample = put(tmp_path / "kserve-sample", "model.bst",
                 settings={"implementation": "mlserver.models.XGBoostModel"})
    with pytest.raises(ValueError, match=r"no module named 'mlserver\.models'.*"
                       r"mlserver_xgboost\.XGBoostModel"):
        runtimes.model_file("kserve-mlserver", "xgboost", sample)


def test_binary_model_bst_loads_as_on_kserve(tmp_path: Path) -> None:
    """Regression (issue 23, point 4): KServe v0.16's xgbserver (xgboost 2.1) and MLServer
    1.5 load the binary `model.bst` format of KServe's own sample; xgboost 3 dropped it.
    The booster is written in that format (xgboost's `deprecated` raw format), then loaded
    and asked for a prediction through the local server's model class."""
    np = pytest.importorskip("numpy")
    xgb = pytest.importorskip("xgboost")
    from lab.backends.local.serving.models import XGBoostModel

    rows = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]] * 5)
    booster = xgb.train({"objective": "multi:softmax", "num_class": 3},
                        xgb.DMatrix(rows, label=[0, 2] * 5), num_boost_round=2)
    folder = tmp_path / "iris"
    folder.mkdir()
    raw = bytes(booster.save_raw(raw_format="deprecated"))
    assert raw[:4] == b"binf"  # the binary format, as in KServe's sample
    (folder / "model.bst").write_bytes(raw)
    model = XGBoostModel("xgboost-iris", folder)
    assert model.load()
    out = model.predict({"instances": rows[:2].tolist()})
    assert out["predictions"] == [0, 2]


def test_a_native_load_error_has_no_stack() -> None:
    from lab.backends.local.serving.model_server import load_error

    exc = RuntimeError("[15:25:16] /workspace/src/learner.cc:1002: Check failed: x == y "
                       "(70 vs. 136) : BoostLearner: wrong model format\nStack trace:\n"
                       "  [bt] (0) /x/libxgboost.so(+0x170a4e) [0x7f08]\n")
    assert load_error(exc) == "Check failed: x == y (70 vs. 136) : BoostLearner: wrong " \
        "model format"


def isvc(model: dict) -> dict:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "xgboost-iris", "namespace": "default"},
            "spec": {"predictor": {"model": model}}}


def test_xgboost_v2_sample_runs_on_mlserver_and_is_announced(tmp_path: Path) -> None:
    put(tmp_path / "iris", "model.bst", settings={"name": "xgboost-iris"})
    spec = serving_spec.parse(isvc({"modelFormat": {"name": "xgboost"}, "protocolVersion": "v2",
                                    "storageUri": "file://iris"}),
                              base_dir=tmp_path, state=tmp_path / "state")
    assert spec.runtime == "kserve-mlserver"
    found = dict(differences(spec))
    assert found["kserve.runtime.mlserver"]["file"] == "model.bst, from model-settings.json"
    assert serving_spec.runtime_of(isvc({"modelFormat": {"name": "xgboost"},
                                         "protocolVersion": "v2"})) == "kserve-mlserver"


def test_grpc_v2_is_served_but_announced(tmp_path: Path) -> None:
    put(tmp_path / "m", "model.joblib")
    spec = serving_spec.parse(isvc({"modelFormat": {"name": "sklearn"},
                                    "protocolVersion": "grpc-v2", "storageUri": "file://m"}),
                              base_dir=tmp_path, state=tmp_path / "state")
    assert spec.grpc and spec.runtime == "kserve-sklearnserver"
    assert "kserve.protocol.grpc" in dict(differences(spec))


def test_a_format_version_no_runtime_serves_is_refused(tmp_path: Path) -> None:
    put(tmp_path / "m", "model.bst")
    with pytest.raises(InputError) as err:
        serving_spec.parse(isvc({"modelFormat": {"name": "xgboost", "version": "2"},
                                 "protocolVersion": "v1", "storageUri": "file://m"}),
                           base_dir=tmp_path, state=tmp_path / "state")
    assert err.value.field == "spec.predictor.model.modelFormat.name"
    assert "No runtime found" in err.value.problem


def test_lightgbm_is_served_as_lgbserver_serves_it(tmp_path: Path) -> None:
    """KServe's lightgbm sample (issue 23, point 10): modelFormat lightgbm picks
    kserve-lgbserver (v1) or MLServer (v2); the booster's model.bst loads and answers class
    probabilities, as lgbserver's LightGBMModel.predict does."""
    np = pytest.importorskip("numpy")
    lgb = pytest.importorskip("lightgbm")
    from lab.backends.local.serving.models import LightGBMModel

    rows = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]] * 10)
    booster = lgb.train({"objective": "multiclass", "num_class": 3, "verbose": -1,
                         "min_data_in_leaf": 1}, lgb.Dataset(rows, label=[0, 2, 1] * 10),
                        num_boost_round=5)
    folder = tmp_path / "iris"
    folder.mkdir()
    booster.save_model(str(folder / "model.bst"))
    spec = serving_spec.parse(isvc({"modelFormat": {"name": "lightgbm"},
                                    "storageUri": "file://iris"}),
                              base_dir=tmp_path, state=tmp_path / "state")
    assert spec.runtime == "kserve-lgbserver"
    assert serving_spec.runtime_of(isvc({"modelFormat": {"name": "lightgbm"},
                                         "protocolVersion": "v2"})) == "kserve-mlserver"
    model = LightGBMModel("lightgbm-iris", folder)
    assert model.load()
    out = model.predict({"instances": rows[:2].tolist()})["predictions"]
    assert [int(np.argmax(p)) for p in out] == [0, 2] and len(out[0]) == 3
