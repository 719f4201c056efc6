"""Nested DAGs as the KFP UI draws them (kflab ui's run graph): a sub-pipeline used twice
(two tasks named `double` in two sub-DAGs), an ExitHandler around a ParallelFor with a
dsl.If inside each iteration, and If/Elif/Else. Tasks are tiny."""

from kfp import dsl

component = dsl.component(packages_to_install=[], install_kfp_package=False)


@component
def double(num: int) -> int:
    print(f"double of {num}")
    return 2 * num


@component
def report(text: str) -> str:
    print(text)
    return text


@dsl.pipeline
def double_pipeline(num: int) -> int:
    return double(num=num).output


@dsl.pipeline(name="nested")
def nested(x: int = 3) -> None:
    first = double_pipeline(num=x)
    double_pipeline(num=first.output)
    done = report(text="done")
    with dsl.ExitHandler(done):
        d = double(num=x)
        with dsl.ParallelFor([1, 2, 3], parallelism=2) as item:
            t = double(num=item)
            with dsl.If(item > 1):
                double(num=t.output)
        with dsl.If(d.output > 5):
            report(text="big")
        with dsl.Elif(d.output > 2):
            report(text="middle")
        with dsl.Else():
            report(text="small")
