"""One Katib trial: cross-validate a scikit-learn Pipeline (vectoriser -> normaliser ->
naive Bayes) with the given parameters, and print the metrics for Katib's StdOut collector.

Usage: python3 train_pipeline.py --vectoriser tfidf --normaliser l2 --alpha 0.1
"""

import argparse
import csv

from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.model_selection import cross_val_score
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer

VECTORISERS = {"count": CountVectorizer, "tfidf": lambda: TfidfVectorizer(norm=None)}


def build(vectoriser: str, normaliser: str, alpha: float) -> Pipeline:
    norm = FunctionTransformer() if normaliser == "none" else Normalizer(norm=normaliser)
    return Pipeline([("vectoriser", VECTORISERS[vectoriser]()), ("normaliser", norm),
                     ("classifier", MultinomialNB(alpha=alpha))])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vectoriser", choices=sorted(VECTORISERS), required=True)
    parser.add_argument("--normaliser", choices=["none", "l1", "l2"], required=True)
    parser.add_argument("--alpha", type=float, required=True)
    parser.add_argument("--data", default="data/reviews.csv")
    args = parser.parse_args()
    with open(args.data, newline="") as fh:
        rows = list(csv.DictReader(fh))
    texts, labels = [r["text"] for r in rows], [int(r["label"]) for r in rows]
    pipe = build(args.vectoriser, args.normaliser, args.alpha)
    scores = cross_val_score(pipe, texts, labels, cv=5)
    print(f"accuracy={scores.mean():.4f}")
    print(f"accuracy-std={scores.std():.4f}")


if __name__ == "__main__":
    main()
