"""kserve.Model classes for the formats served locally, loading models as KServe's own
`sklearnserver` and `xgbserver` do (those packages are not published on PyPI), from the
file the chosen runtime would load (runtimes.model_file: one file for KServe's servers,
model-settings.json or a well-known name for MLServer).

Imported only inside the model server process: kserve is slow to import and the CLI
must stay quick.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import kserve
from kserve.errors import InferenceError
from kserve.utils.utils import get_predict_input, get_predict_response

from lab.backends.local.serving.runtimes import model_file

# Same switch as KServe's sklearn server: answer class probabilities instead of labels.
PREDICT_PROBA_ENV = "PREDICT_PROBA"


class SKLearnModel(kserve.Model):
    """A scikit-learn estimator saved with joblib (.joblib) or pickle (.pkl, .pickle)."""

    def __init__(self, name: str, model_dir: Path, runtime: str = "kserve-sklearnserver") -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.runtime = runtime
        self._model: Any = None
        self.ready = False

    def load(self) -> bool:
        path = model_file(self.runtime, "sklearn", self.model_dir).path
        if path.suffix == ".joblib":
            import joblib

            self._model = joblib.load(path)
        else:
            with open(path, "rb") as fh:
                self._model = pickle.load(fh)  # noqa: S301 - the user's own model file
        if not hasattr(self._model, "predict"):
            raise TypeError(f"{path.name} holds a {type(self._model).__name__}, "
                            "not an estimator with predict()")
        self.ready = True
        return self.ready

    def predict(self, payload: Any, headers: dict[str, str] | None = None,
                response_headers: dict[str, str] | None = None) -> Any:
        inputs = get_predict_input(payload)
        try:
            if os.environ.get(PREDICT_PROBA_ENV, "false").lower() == "true":
                result = self._model.predict_proba(inputs)
            else:
                result = self._model.predict(inputs)
        except Exception as exc:
            raise InferenceError(str(exc)) from exc
        return get_predict_response(payload, result, self.name)


class _BoosterModel(kserve.Model):
    """A gradient-boosting Booster read from the model folder as its KServe server reads it;
    subclasses name the framework, the default runtime, how to open the file and predict."""

    framework = ""
    default_runtime = ""

    def __init__(self, name: str, model_dir: Path, runtime: str | None = None,
                 nthread: int = 1) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.runtime = runtime or self.default_runtime
        self.nthread = nthread
        self._booster: Any = None
        self.ready = False

    def load(self) -> bool:
        path = model_file(self.runtime, self.framework, self.model_dir).path
        self._booster = self._open(str(path))
        self.ready = True
        return self.ready

    def _open(self, path: str) -> Any:
        raise NotImplementedError

    def _predict(self, payload: Any) -> Any:
        raise NotImplementedError

    def predict(self, payload: Any, headers: dict[str, str] | None = None,
                response_headers: dict[str, str] | None = None) -> Any:
        try:
            result = self._predict(payload)
        except Exception as exc:
            raise InferenceError(str(exc)) from exc
        return get_predict_response(payload, result, self.name)


class XGBoostModel(_BoosterModel):
    """An XGBoost Booster saved with save_model (.bst binary, .json or .ubj)."""

    framework, default_runtime = "xgboost", "kserve-xgbserver"

    def _open(self, path: str) -> Any:
        import xgboost as xgb

        return xgb.Booster(params={"nthread": self.nthread}, model_file=path)

    def _predict(self, payload: Any) -> Any:
        import xgboost as xgb

        return self._booster.predict(xgb.DMatrix(get_predict_input(payload),
                                                 nthread=self.nthread))


class LightGBMModel(_BoosterModel):
    """A LightGBM Booster saved with save_model (model.bst), read as KServe's lgbserver
    reads it (python/lgbserver/lgbserver/model.py: the input's columns named after the
    booster's features, predict() answering class probabilities)."""

    framework, default_runtime = "lightgbm", "kserve-lgbserver"

    def _open(self, path: str) -> Any:
        import lightgbm as lgb

        return lgb.Booster(params={"nthread": self.nthread}, model_file=path)

    def _predict(self, payload: Any) -> Any:
        return self._booster.predict(
            get_predict_input(payload, columns=self._booster.feature_name()))


MODEL_CLASSES: dict[str, type[kserve.Model]] = {
    "lightgbm": LightGBMModel,
    "sklearn": SKLearnModel,
    "xgboost": XGBoostModel,
}
