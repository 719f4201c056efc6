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


@component
def train_logistic_regression(train: Input[Dataset], test: Input[Dataset], metrics: Output[Metrics],
                              model: Output[Model]) -> float:
    """Logistic regression on standardised features."""
    import joblib
    import pandas as pd
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_df, test_df = pd.read_csv(train.path), pd.read_csv(test.path)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    clf.fit(train_df.drop(columns="target"), train_df["target"])
    accuracy = float(clf.score(test_df.drop(columns="target"), test_df["target"]))
    metrics.log_metric("accuracy", accuracy)
    joblib.dump(clf, model.path)
    return accuracy


@component
def train_svm(train: Input[Dataset], test: Input[Dataset], metrics: Output[Metrics],
              model: Output[Model]) -> float:
    """A support vector machine (RBF kernel) on standardised features."""
    import joblib
    import pandas as pd
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    train_df, test_df = pd.read_csv(train.path), pd.read_csv(test.path)
    clf = make_pipeline(StandardScaler(), SVC(kernel="rbf", C=1.0))
    clf.fit(train_df.drop(columns="target"), train_df["target"])
    accuracy = float(clf.score(test_df.drop(columns="target"), test_df["target"]))
    metrics.log_metric("accuracy", accuracy)
    joblib.dump(clf, model.path)
    return accuracy


@component
def train_naive_bayes(train: Input[Dataset], test: Input[Dataset], metrics: Output[Metrics],
                      model: Output[Model]) -> float:
    """Gaussian naive Bayes: fast, assumes independent features."""
    import joblib
    import pandas as pd
    from sklearn.naive_bayes import GaussianNB

    train_df, test_df = pd.read_csv(train.path), pd.read_csv(test.path)
    clf = GaussianNB()
    clf.fit(train_df.drop(columns="target"), train_df["target"])
    accuracy = float(clf.score(test_df.drop(columns="target"), test_df["target"]))
    metrics.log_metric("accuracy", accuracy)
    joblib.dump(clf, model.path)
    return accuracy


@component
def train_xgboost(train: Input[Dataset], test: Input[Dataset], metrics: Output[Metrics],
                  model: Output[Model]) -> float:
    """Gradient-boosted trees with XGBoost."""
    import joblib
    import pandas as pd
    from xgboost import XGBClassifier

    train_df, test_df = pd.read_csv(train.path), pd.read_csv(test.path)
    clf = XGBClassifier(n_estimators=100, max_depth=3, learning_rate=0.1, n_jobs=1)
    clf.fit(train_df.drop(columns="target"), train_df["target"])
    accuracy = float(clf.score(test_df.drop(columns="target"), test_df["target"]))
    metrics.log_metric("accuracy", accuracy)
    joblib.dump(clf, model.path)
    return accuracy


@component
def compare_models(names: list, accuracies: list, decision_tree: Input[Model],
                   logistic_regression: Input[Model], svm: Input[Model],
                   naive_bayes: Input[Model], xgboost: Input[Model],
                   metrics: Output[Metrics], best_model: Output[Model]) -> float:
    """Pick the most accurate model and publish it as the pipeline's model artifact."""
    import shutil

    models = {"decision_tree": decision_tree, "logistic_regression": logistic_regression,
              "svm": svm, "naive_bayes": naive_bayes, "xgboost": xgboost}
    # Values gathered from several tasks may arrive as text: make them numbers.
    scores = {name: float(acc) for name, acc in zip(names, accuracies, strict=True)}
    for name, accuracy in scores.items():
        metrics.log_metric(f"accuracy_{name}", accuracy)
    best = max(scores, key=scores.get)
    metrics.log_metric("best_accuracy", scores[best])
    shutil.copyfile(models[best].path, best_model.path)
    best_model.metadata["algorithm"] = best
    best_model.metadata["accuracy"] = scores[best]
    print(f"best model: {best} with accuracy {scores[best]:.4f}")
    return scores[best]
