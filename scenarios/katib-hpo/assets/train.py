"""One Katib trial: cross-validate an RBF support-vector classifier on scikit-learn's bundled
handwritten-digits dataset and print the score the way Katib's StdOut collector reads it.

Usage: python3 train.py --C=10 --gamma=0.001
"""

import argparse
import time

from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score
from sklearn.svm import SVC


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--C", type=float, required=True, help="inverse regularisation")
    parser.add_argument("--gamma", type=float, required=True, help="RBF kernel width")
    args = parser.parse_args()
    x, y = load_digits(return_X_y=True)
    t0 = time.perf_counter()
    scores = cross_val_score(SVC(C=args.C, gamma=args.gamma), x, y, cv=3)
    for fold, score in enumerate(scores):
        print(f"fold {fold}: fold-accuracy={score:.4f}")
    # Katib's StdOut collector keeps lines like `name=value` for the declared metrics.
    print(f"accuracy={scores.mean():.4f}")
    print(f"train-seconds={time.perf_counter() - t0:.3f}")


if __name__ == "__main__":
    main()
