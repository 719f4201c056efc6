"""One Katib trial of the gradient-boosting recipe: fit scikit-learn's gradient-boosted
regression trees (GBRT) on Friedman's #1 regression problem (generated, offline, the same on
every machine) and print the validation R^2 the way Katib's StdOut collector reads it.

The score is taken at the best number of trees up to --n-estimators (staged predictions,
what early stopping would pick), so more trees can cost time but never lower the score.

Usage: python3 gbrt.py --n-estimators 200 --max-depth 3 --learning-rate 0.1 --max-features 1.0
"""

import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-estimators", type=int, required=True, help="trees, at most")
    ap.add_argument("--max-depth", type=int, required=True, help="depth of each tree")
    ap.add_argument("--learning-rate", type=float, required=True, help="shrinkage per tree")
    ap.add_argument("--max-features", type=float, required=True,
                    help="share of the features each split may look at")
    args = ap.parse_args()
    x, y = make_friedman1(n_samples=1200, noise=1.0, random_state=0)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.3, random_state=0)
    t0 = time.perf_counter()
    model = GradientBoostingRegressor(
        n_estimators=args.n_estimators, max_depth=args.max_depth,
        learning_rate=args.learning_rate, max_features=args.max_features, random_state=0,
    ).fit(x_tr, y_tr)
    scores = [r2_score(y_va, pred) for pred in model.staged_predict(x_va)]
    best = int(np.argmax(scores))
    print(f"trees-used={best + 1}")
    print(f"fit-seconds={time.perf_counter() - t0:.3f}")
    print(f"r2={scores[best]:.4f}")


if __name__ == "__main__":
    main()
