"""Pipeline components for the classifiers lab.

Each function below becomes one pipeline step. KFP runs every step in its own process (on a
cluster: its own container), so each function imports what it needs inside its body.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

# On a cluster each step runs in its own container: KFP installs kfp (the version that
# compiled the pipeline) and these packages when the step starts. Locally they are already
# installed, so nothing is downloaded. The image is pinned in manifests/versions.yaml.
component = dsl.component(base_image="docker.io/library/python:3.11-slim",
                          packages_to_install=["scikit-learn", "pandas", "joblib",
                                               "xgboost-cpu"])


@component
def load_data(test_size: float, seed: int, train: Output[Dataset], test: Output[Dataset]) -> int:
    """Load the breast-cancer dataset that ships with scikit-learn and split it."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    frame = load_breast_cancer(as_frame=True).frame
    train_df, test_df = train_test_split(frame, test_size=test_size, random_state=seed,
                                         stratify=frame["target"])
    train_df.to_csv(train.path, index=False)
    test_df.to_csv(test.path, index=False)
    return len(frame)


@component
def train_decision_tree(train: Input[Dataset], test: Input[Dataset], metrics: Output[Metrics],
                        model: Output[Model]) -> float:
    """Fit a decision tree and report its accuracy on the test split."""
    import joblib
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    train_df, test_df = pd.read_csv(train.path), pd.read_csv(test.path)
    clf = DecisionTreeClassifier(max_depth=5, random_state=0)
    clf.fit(train_df.drop(columns="target"), train_df["target"])
    accuracy = float(clf.score(test_df.drop(columns="target"), test_df["target"]))
    metrics.log_metric("accuracy", accuracy)
    joblib.dump(clf, model.path)
    return accuracy


# TODO (step 2): add train_logistic_regression, train_svm, train_naive_bayes and
# train_xgboost here, each with the same inputs and outputs as train_decision_tree.
