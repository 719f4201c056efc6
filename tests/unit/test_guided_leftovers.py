"""What one lab leaves is never shown as another's, and a finished run is never called
running (issue 33 Why 4): the closing summary lists only what still runs -- a TrainJob ends
`Complete`, not `Succeeded` --, `kflab check` shows the warnings of an apply made in this
step of this lab only, and the demo's summary names each skipped step with its own reason.

Real CLI runs (child processes) of two small scenarios written here, each a TrainJob of one
node running a one-line Python command."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: {name}}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer:
    {extra}command: ["{python}", "-c", "print('trained')"]
"""


def _scenario(root: Path, sid: str, job: str) -> None:
    folder = root / sid
    (folder / "steps").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "solutions").mkdir()
    (folder / "solutions" / "job.yaml").write_text(
        TRAINJOB.format(name=job, extra="", python=sys.executable))
    (folder / "steps" / "s.md").write_text("Train it.\n")
    (folder / "scenario.yaml").write_text(textwrap.dedent(f"""\
        id: {sid}
        title: Lab {sid}
        level: beginner
        duration: 1m
        steps:
          - id: train
            title: Train {job}
            text: steps/s.md
            solve:
              - copy: {{from: solutions/job.yaml, to: job.yaml}}
              - apply: job.yaml
            checks:
              - {{type: condition, kind: TrainJob, name: {job}, condition: Complete,
                 timeout: 60, message: apply job.yaml}}
        """))


@pytest.fixture()
def labs(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "scenarios"
    _scenario(root, "lab-a", "job-a")
    _scenario(root, "lab-b", "job-b")
    return {"KFLAB_SCENARIOS": str(root)}


def test_a_complete_trainjob_is_not_called_running(kflab, state: Path, tmp_path: Path,
                                                   labs: dict[str, str]) -> None:
    kflab("scenario", "start", "lab-a", "--workdir", str(tmp_path / "a"), env=labs)
    done = kflab("solve", env=labs, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Scenario 'lab-a' complete." in done.stdout
    assert "Nothing is left running." in done.stdout, done.stdout
    assert "Still running" not in done.stdout
    # the next lab's summary does not name the first lab's jobs either
    kflab("scenario", "start", "lab-b", "--workdir", str(tmp_path / "b"), env=labs)
    done = kflab("solve", env=labs, timeout=300)
    assert "Nothing is left running." in done.stdout and "job-a" not in done.stdout, \
        done.stdout


def test_check_shows_only_this_steps_apply_warnings(kflab, state: Path, tmp_path: Path,
                                                    labs: dict[str, str]) -> None:
    """A typo'd field (numNode) warns at apply; `kflab check` in that step repeats it (the
    control), `kflab check` in another lab does not."""
    kflab("scenario", "start", "lab-a", "--workdir", str(tmp_path / "a"), env=labs)
    typo = tmp_path / "a" / "typo.yaml"
    typo.write_text(TRAINJOB.format(name="other", extra="numNode: 2\n    ",
                                    python=sys.executable))
    applied = kflab("apply", "-f", str(typo), env=labs, timeout=300)
    assert "unknown field" in applied.stderr and "numNode" in applied.stderr, applied.stderr
    here = kflab("check", "--wait", "0", env=labs)
    assert here.returncode == 1 and "Your last `kflab apply` warned" in here.stdout, \
        here.stdout
    kflab("scenario", "start", "lab-b", "--workdir", str(tmp_path / "b"), env=labs)
    there = kflab("check", "--wait", "0", env=labs)
    assert there.returncode == 1, there.stdout + there.stderr
    assert "warned" not in there.stdout and "numNode" not in there.stdout, there.stdout


def test_the_demo_summary_names_each_skipped_step_and_why(tmp_path: Path, capsys) -> None:
    from lab.scenarios.runner import ScenarioResult, StepResult
    from lab.term.summaries import summary

    res = ScenarioResult("tj", "TrainJob lab", "auto", "local", "2026-01-01T00:00:00Z",
                         status="skipped")
    res.steps = [StepResult("one", "one", status="passed"),
                 StepResult("two", "two", status="passed"),
                 StepResult("gpu", "gpu", skip_reason="needs an NVIDIA GPU (0 GPU(s) on "
                            "the local backend, 1 needed)")]
    summary([res])
    out = capsys.readouterr().out
    assert "tj: step gpu skipped, needs an NVIDIA GPU (0 GPU(s) on the local backend, 1 " \
        "needed); 2 of 3 passed" in " ".join(out.split())
