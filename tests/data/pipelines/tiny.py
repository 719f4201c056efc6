"""A two-step pipeline for tests: a parameter, a metric, a model artifact; can be made to fail."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

component = dsl.component(packages_to_install=[], install_kfp_package=False)


@component
def make(n: int, data: Output[Dataset]) -> int:
    with open(data.path, "w") as fh:
        fh.write("x" * n)
    return n * 2


@component
def train(data: Input[Dataset], fail: bool, metrics: Output[Metrics],
          model: Output[Model]) -> float:
    if fail:
        raise RuntimeError("training diverged (on purpose)")
    with open(data.path) as fh:
        size = len(fh.read())
    metrics.log_metric("accuracy", size / 10)
    with open(model.path, "w") as fh:
        fh.write("weights")
    return size / 10


@dsl.pipeline(name="tiny")
def tiny(n: int = 3, fail: bool = False):
    made = make(n=n)
    train(data=made.outputs["data"], fail=fail)
