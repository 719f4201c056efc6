"""Every construct the local pipeline engine runs as a cluster does, in one small pipeline:
If/Elif/Else, ParallelFor over a static and a computed list (with parallelism and
dsl.Collected), ExitHandler with PipelineTaskFinalStatus, set_retry, set_env_variable,
.after(), set_caching_options(False). Tasks are tiny: the test measures behaviour."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output, PipelineTaskFinalStatus

component = dsl.component(packages_to_install=[], install_kfp_package=False)


@component
def make(n: int, data: Output[Dataset]) -> int:
    with open(data.path, "w") as fh:
        fh.write(str(n))
    return n


@component
def flip(data: Input[Dataset]) -> str:
    import os

    with open(data.path) as fh:
        n = int(fh.read())
    print("GREETING", os.environ.get("GREETING"))
    return "heads" if n > 2 else "tails"


@component
def items(n: int) -> list:
    return list(range(n))


@component
def square(x: int) -> int:
    return x * x


@component
def total(xs: list) -> int:
    return sum(xs)


@component
def flaky(marker: str) -> str:
    """Fails on its first attempt, succeeds on the retry (a file marks the attempt)."""
    import os

    path = os.path.join(os.environ["TMPDIR"], marker)
    if not os.path.exists(path):
        open(path, "w").close()
        raise RuntimeError("first attempt fails on purpose")
    return "second attempt"


@component
def say(text: str) -> str:
    print(text)
    return text


@component
def final(status: PipelineTaskFinalStatus) -> str:
    print("FINAL", status.state, status.pipeline_task_name)
    return status.state


@dsl.pipeline(name="control-flow")
def control_flow(n: int = 3, marker: str = "flaky-marker"):
    done = final()
    with dsl.ExitHandler(done):
        made = make(n=n)
        coin = flip(data=made.outputs["data"]).set_env_variable("GREETING", "hello")
        with dsl.If(coin.output == "heads"):
            say(text="heads branch")
        with dsl.Elif(coin.output == "edge"):
            say(text="edge branch")
        with dsl.Else():
            say(text="tails branch")
        listed = items(n=n)
        with dsl.ParallelFor(listed.output, parallelism=2) as x:
            sq = square(x=x)
        total(xs=dsl.Collected(sq.output))
        with dsl.ParallelFor([10, 20]) as y:
            square(x=y).set_caching_options(False)
        flaky(marker=marker).set_retry(num_retries=1, backoff_duration="0s").after(made)
