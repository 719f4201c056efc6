"""Rollouts and runtimes with real KServe model servers (nothing mocked).

kserve.rollout: KServe's raw Deployment keeps the old pod until the new one is ready, so a
new version that fails to load leaves the old one serving (Ready stays True, modelStatus
BlockedByFailedLoad) until the progress deadline turns Ready False, while the old pod
still answers. kserve.runtime.mlserver: KServe's xgboost v2 sample layout (model.bst
beside model-settings.json) is served; V1 is refused as MLServer refuses it.
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lab.backends.local import LocalBackend
from lab.backends.local.procs import is_running
from lab.backends.local.serving.handler import NEXT, proc_id
from lab.errors import LabError
from lab.kube.conditions import get_condition

ROWS = [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6], [7.7, 3.0, 6.1, 2.3]]


def isvc(name: str, fmt: str, uri: str, protocol: str = "v1") -> dict:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name},
            "spec": {"predictor": {"model": {"modelFormat": {"name": fmt},
                                             "protocolVersion": protocol,
                                             "storageUri": uri}}}}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import joblib
    import xgboost as xgb
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("models")
    X, y = load_iris(return_X_y=True)
    (root / "sk").mkdir()
    joblib.dump(LogisticRegression(max_iter=500).fit(X, y), root / "sk" / "model.joblib")
    sample = root / "xgb-sample"  # KServe's xgboost v2 sample layout
    sample.mkdir()
    booster = xgb.train({"objective": "multi:softmax", "num_class": 3, "nthread": 1,
                         "seed": 0}, xgb.DMatrix(X, label=y), num_boost_round=10)
    with warnings.catch_warnings():  # xgboost says .bst is written as UBJSON: fine
        warnings.simplefilter("ignore", UserWarning)
        booster.save_model(sample / "model.bst")
    (sample / "model-settings.json").write_text(json.dumps(
        {"name": "xgb", "version": "v0.1.0", "implementation": "mlserver_xgboost.XGBoostModel"}))
    (root / "corrupt").mkdir()
    (root / "corrupt" / "model.joblib").write_bytes(b"\x80\x04this is not a pickle")
    return root


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    b = LocalBackend(str(tmp_path / "state"))
    yield b
    b.down()


def ready(obj: dict) -> dict:
    return get_condition(obj["status"], "Ready") or {}


def test_bad_rollout_keeps_the_old_server(backend: LocalBackend, models: Path) -> None:
    first = backend.apply(isvc("iris", "sklearn", str(models / "sk")), base_dir=models)
    assert ready(first)["status"] == "True"
    old = backend.procs.get(proc_id("default", "iris"))
    events: list[dict] = []
    backend.sink = events.append
    bad = backend.apply(isvc("iris", "sklearn", str(models / "corrupt")), base_dir=models)
    # the old version serves on: Ready True, the same URL, the same process
    assert ready(bad)["status"] == "True" and bad["status"]["url"] == first["status"]["url"]
    model = bad["status"]["modelStatus"]
    assert model["transitionStatus"] == "BlockedByFailedLoad"
    assert model["states"] == {"activeModelState": "Loaded", "targetModelState": "FailedToLoad"}
    assert model["lastFailureInfo"]["reason"] == "ModelLoadFailed"
    assert "corrupt" in model["lastFailureInfo"]["message"]
    assert bad["metadata"]["generation"] == 2
    assert backend.procs.get(proc_id("default", "iris")).pid == old.pid and is_running(old.pid)
    assert backend.procs.get(proc_id("default", "iris", NEXT)) is None  # the new one is gone
    assert backend.predict("iris", {"instances": ROWS}, protocol="v1") == \
        {"predictions": [1, 1, 2]}
    # past the Deployment's progress deadline: Ready False, the old pod still answers
    stored = backend.store.get("InferenceService", "iris")
    long_ago = datetime.now(UTC) - timedelta(seconds=601)
    stored["status"]["modelStatus"]["lastFailureInfo"]["time"] = \
        long_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
    backend.store.put(stored)
    late = backend.get("InferenceService", "iris")
    assert ready(late)["status"] == "False"
    assert ready(late)["reason"] == "ProgressDeadlineExceeded"
    assert backend.predict("iris", {"instances": ROWS[:1]})["predictions"] == [1]
    # a good rollout takes over: new process, new (local) URL, the old one stopped
    good = backend.apply(isvc("iris", "sklearn", str(models / "sk")), base_dir=models)
    assert ready(good)["status"] == "True"
    assert good["status"]["modelStatus"]["transitionStatus"] == "UpToDate"
    new = backend.procs.get(proc_id("default", "iris"))
    assert new.pid != old.pid and not is_running(old.pid)
    assert good["status"]["url"] != first["status"]["url"]
    assert any(e.get("rule") == "kserve.rollout.url" for e in events)
    assert [line for line in backend.logs("InferenceService", "iris") if "Uvicorn" in line \
            or "uvicorn" in line.lower()]  # the promoted server's log is the service's log


def test_cli_apply_exits_1_on_a_failed_rollout(backend: LocalBackend, models: Path,
                                               tmp_path: Path, kflab) -> None:
    env = {"KFLAB_STATE": str(backend.root)}
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(json.dumps(isvc("iris", "sklearn", str(models / "sk"))))
    bad.write_text(json.dumps(isvc("iris", "sklearn", str(models / "corrupt"))))
    assert kflab("apply", "-f", str(good), env=env).returncode == 0
    out = kflab("apply", "-f", str(bad), env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "inferenceservice/iris RolloutFailed" in out.stdout
    assert "previous version still serves" in out.stderr


def test_xgboost_v2_sample_is_served_like_mlserver(backend: LocalBackend, models: Path) -> None:
    events: list[dict] = []
    backend.sink = events.append
    obj = backend.apply(isvc("xgboost-iris", "xgboost", str(models / "xgb-sample"), "v2"),
                        base_dir=models)
    assert ready(obj)["status"] == "True", obj["status"]
    assert obj["metadata"]["annotations"]["kflab.dev/local-differences"] == \
        "kserve.runtime.mlserver"
    assert any("kserve-mlserver" in e.get("text", "") for e in events)
    answer = backend.predict("xgboost-iris", {"instances": ROWS}, protocol="v2")
    assert answer["outputs"][0]["data"] == [1.0, 1.0, 2.0]
    with pytest.raises(LabError, match="only the V2"):
        backend.predict("xgboost-iris", {"instances": ROWS}, protocol="v1")
