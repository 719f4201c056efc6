"""The classifiers pipeline, step 3: five classifiers, then the best one as the output."""

from components import (
    compare_models,
    load_data,
    train_decision_tree,
    train_logistic_regression,
    train_naive_bayes,
    train_svm,
    train_xgboost,
)
from kfp import dsl

TRAINERS = {
    "decision_tree": train_decision_tree,
    "logistic_regression": train_logistic_regression,
    "svm": train_svm,
    "naive_bayes": train_naive_bayes,
    "xgboost": train_xgboost,
}


@dsl.pipeline(name="classifiers", description="Compare classifiers on one dataset")
def classifiers(test_size: float = 0.25, seed: int = 42):
    data = load_data(test_size=test_size, seed=seed)
    tasks = {name: train(train=data.outputs["train"], test=data.outputs["test"])
             for name, train in TRAINERS.items()}
    compare_models(
        names=list(tasks),
        accuracies=[task.outputs["Output"] for task in tasks.values()],
        **{name: task.outputs["model"] for name, task in tasks.items()},
    )
