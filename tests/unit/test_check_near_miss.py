"""A check whose resource is missing says what there is instead: the near miss a typo made
(a newcomer ran `--name frist-run` and was told only "No successful run named
'first-run' yet"), else the names there are. The run is a real local pipeline run."""

from __future__ import annotations

import shutil
from pathlib import Path

from lab.backends import shapes
from lab.backends.local import LocalBackend
from lab.scenarios import checks
from lab.scenarios.checks import Context
from lab.scenarios.model import Check

TINY = Path(__file__).resolve().parents[1] / "data" / "pipelines" / "tiny.py"


def test_a_missing_run_names_the_near_miss(state: Path, tmp_path: Path) -> None:
    shutil.copy(TINY, tmp_path / "tiny.py")
    backend = LocalBackend(str(state))
    run = backend.apply(shapes.pipeline_run("frist-run", {"pipeline": "tiny.py"}),
                        base_dir=tmp_path)
    assert shapes.state(run) == "SUCCEEDED"
    ctx = Context(backend, tmp_path)
    want = Check("pipeline-run", "msg", 0, {"name": "first-run"}, "test:1")
    out = checks.evaluate(want, ctx, wait=False)
    assert not out.ok
    assert out.observed == ("no pipeline run named 'first-run' (there is 'frist-run': the "
                            "step asks for 'first-run')"), out.observed
    field = Check("field", "msg", 0, {"kind": "PipelineRun", "name": "first-run",
                                       "query": "status.state", "value": "SUCCEEDED"}, "t:2")
    assert checks.evaluate(field, ctx, wait=False).observed.endswith(
        "(there is 'frist-run': the step asks for 'first-run')")
    far = Check("pipeline-run", "msg", 0, {"name": "five-models"}, "test:3")
    assert checks.evaluate(far, ctx, wait=False).observed == (
        "no pipeline run named 'five-models' (there is 'frist-run')")
    backend.down()
