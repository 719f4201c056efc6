"""The classifiers pipeline. Run it with: kflab pipeline run pipeline.py --name NAME"""

from components import load_data, train_decision_tree
from kfp import dsl


@dsl.pipeline(name="classifiers", description="Compare classifiers on one dataset")
def classifiers(test_size: float = 0.25, seed: int = 42):
    data = load_data(test_size=test_size, seed=seed)
    train_decision_tree(train=data.outputs["train"], test=data.outputs["test"])
    # TODO (step 2): train the four other classifiers on the same data.
    # TODO (step 3): compare the five models and output the best one.
