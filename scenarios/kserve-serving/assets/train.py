"""Train an iris classifier and save it where an InferenceService can load it.

    python train.py --version 1   # a quick baseline: a depth-1 decision tree (scikit-learn)
    python train.py --version 2   # the improved model: gradient-boosted trees (XGBoost)

Version 1 is saved as models/v1/model.joblib (KServe's sklearn format), version 2 as
models/v2/model.json (KServe's xgboost format: a Booster saved with save_model).
"""

import argparse
from pathlib import Path

from sklearn.datasets import load_iris


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", type=int, choices=(1, 2), required=True)
    args = parser.parse_args()
    X, y = load_iris(return_X_y=True)
    out = Path("models") / f"v{args.version}"
    out.mkdir(parents=True, exist_ok=True)
    if args.version == 1:
        import joblib
        from sklearn.tree import DecisionTreeClassifier

        model = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, y)
        path = out / "model.joblib"
        joblib.dump(model, path)
        accuracy = model.score(X, y)
    else:
        import xgboost as xgb

        booster = xgb.train(
            {"objective": "multi:softmax", "num_class": 3, "max_depth": 3, "eta": 0.3,
             "nthread": 1, "seed": 0},
            xgb.DMatrix(X, label=y), num_boost_round=20,
        )
        path = out / "model.json"
        booster.save_model(path)
        accuracy = float((booster.predict(xgb.DMatrix(X)) == y).mean())
    print(f"saved {path} (training accuracy {accuracy:.2f})")


if __name__ == "__main__":
    main()
