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


class XGBoostModel(kserve.Model):
    """An XGBoost Booster saved with save_model (.bst binary, .json or .ubj)."""

    def __init__(self, name: str, model_dir: Path, runtime: str = "kserve-xgbserver",
                 nthread: int = 1) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.runtime = runtime
        self.nthread = nthread
        self._booster: Any = None
        self.ready = False

    def load(self) -> bool:
        import xgboost as xgb

        path = model_file(self.runtime, "xgboost", self.model_dir).path
        self._booster = xgb.Booster(params={"nthread": self.nthread}, model_file=str(path))
        self.ready = True
        return self.ready

    def predict(self, payload: Any, headers: dict[str, str] | None = None,
                response_headers: dict[str, str] | None = None) -> Any:
        import xgboost as xgb

        try:
            dmatrix = xgb.DMatrix(get_predict_input(payload), nthread=self.nthread)
            result = self._booster.predict(dmatrix)
        except Exception as exc:
            raise InferenceError(str(exc)) from exc
        return get_predict_response(payload, result, self.name)


class LightGBMModel(kserve.Model):
    """A LightGBM Booster saved with save_model (model.bst), read as KServe's lgbserver
    reads it (python/lgbserver/lgbserver/model.py: the input's columns named after the
    booster's features, predict() answering class probabilities)."""

    def __init__(self, name: str, model_dir: Path, runtime: str = "kserve-lgbserver",
                 nthread: int = 1) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.runtime = runtime
        self.nthread = nthread
        self._booster: Any = None
        self.ready = False

    def load(self) -> bool:
        import lightgbm as lgb

        path = model_file(self.runtime, "lightgbm", self.model_dir).path
        self._booster = lgb.Booster(params={"nthread": self.nthread}, model_file=str(path))
        self.ready = True
        return self.ready

    def predict(self, payload: Any, headers: dict[str, str] | None = None,
                response_headers: dict[str, str] | None = None) -> Any:
        try:
            inputs = get_predict_input(payload, columns=self._booster.feature_name())
            result = self._booster.predict(inputs)
        except Exception as exc:
            raise InferenceError(str(exc)) from exc
        return get_predict_response(payload, result, self.name)


MODEL_CLASSES: dict[str, type[kserve.Model]] = {
    "lightgbm": LightGBMModel,
    "sklearn": SKLearnModel,
    "xgboost": XGBoostModel,
}
