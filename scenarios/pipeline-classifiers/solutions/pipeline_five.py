"""The classifiers pipeline, step 2: five classifiers trained on the same split."""

from components import (
    load_data,
    train_decision_tree,
    train_logistic_regression,
    train_naive_bayes,
    train_svm,
    train_xgboost,
)
from kfp import dsl


@dsl.pipeline(name="classifiers", description="Compare classifiers on one dataset")
def classifiers(test_size: float = 0.25, seed: int = 42):
    data = load_data(test_size=test_size, seed=seed)
    for train_step in (train_decision_tree, train_logistic_regression, train_svm,
                       train_naive_bayes, train_xgboost):
        train_step(train=data.outputs["train"], test=data.outputs["test"])
