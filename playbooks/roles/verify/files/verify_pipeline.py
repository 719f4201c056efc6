"""Source of pipeline.json, the two-task KFP pipeline the verify role runs on the cluster.

Two container components (no `pip install` at run time, so it runs offline with the pinned
image), the second consuming the first's output parameter: a real run passes data from task to
task through KFP's driver, launcher and ML Metadata. Caching is off, so every verify run
executes both tasks. Regenerate after editing, from this file's folder
(tests/unit/test_verify_workloads.py compares):

    python verify_pipeline.py > pipeline.json

The image stays a placeholder: kflab_verify.py puts images.verify.python of
manifests/versions.yaml there, so the pinned image has one home.
"""

import json
import sys

from kfp import compiler, dsl

IMAGE_PLACEHOLDER = "KFLAB_VERIFY_IMAGE"
WORD = "kflab"


@dsl.container_component
def produce(word: dsl.OutputPath(str)):  # type: ignore[valid-type]
    """Writes WORD to its output parameter file."""
    return dsl.ContainerSpec(image=IMAGE_PLACEHOLDER, command=[
        "python3", "-c",
        "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
        f"open(sys.argv[1], 'w').write('{WORD}')", word])


@dsl.container_component
def consume(word: str):
    """Fails unless it received WORD from `produce`."""
    return dsl.ContainerSpec(image=IMAGE_PLACEHOLDER, command=[
        "python3", "-c",
        f"import sys; assert sys.argv[1] == '{WORD}', sys.argv[1]; print('received', sys.argv[1])",
        word])


@dsl.pipeline(name="kflab-verify", description="kflab verify: two tasks passing a parameter")
def verify_pipeline() -> None:
    first = produce().set_caching_options(False)
    consume(word=first.outputs["word"]).set_caching_options(False)


def compiled(image: str = IMAGE_PLACEHOLDER) -> dict:
    """The pipeline spec (IR) as a dict, with `image` in both tasks."""
    import tempfile
    from pathlib import Path

    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pipeline.yaml"
        compiler.Compiler().compile(verify_pipeline, str(out))
        text = out.read_text().replace(IMAGE_PLACEHOLDER, image)
    spec = yaml.safe_load(text)
    spec.pop("sdkVersion", None)  # the compiler's own version: not part of what runs
    return spec


if __name__ == "__main__":
    json.dump(compiled(*sys.argv[1:2]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
