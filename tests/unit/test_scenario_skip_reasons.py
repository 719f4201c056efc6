"""Each skipped step says its own first unmet need; `scenario list` and a run decide which
steps run by the same rule (availability.skip_reason); a missing extra's advice comes from
one helper (deps.install_extras) and names only the extras needed (issue 33, points 4, 7)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from lab import content, deps
from lab.cli import cli
from lab.errors import LabError
from lab.scenarios import availability
from lab.scenarios.loader import find, load_scenario
from lab.scenarios.runner import run_scenario
from tests.conftest import run_kflab

REPO = Path(__file__).resolve().parents[2]
ABSENT = "kflab_test_module_that_is_not_installed"  # really absent: no mock needed

SCENARIO = f"""
id: skipwhy-demo
title: t
level: beginner
duration: 1m
steps:
  - id: first
    title: runs anywhere
    text: steps/a.md
    solve:
      - command: [python, -c, "open('a.txt', 'w').write('x')"]
    checks:
      - {{type: file-exists, path: a.txt, message: a.txt missing}}
  - id: sdk
    title: needs an extra
    text: steps/a.md
    needs:
      - type: command
        argv: [python, -c, "import {ABSENT}"]
        extra: sdk
        message: needs the Kubeflow SDK
    solve:
      - command: [python, -c, "open('b.txt', 'w').write('x')"]
    checks:
      - {{type: file-exists, path: b.txt, message: b.txt missing}}
  - id: gpu
    title: needs many GPUs
    text: steps/a.md
    needs:
      - {{type: gpus, min: 64, message: needs 64 GPUs}}
    solve:
      - command: [python, -c, "open('c.txt', 'w').write('x')"]
    checks:
      - {{type: file-exists, path: c.txt, message: c.txt missing}}
  - id: after-gpu
    title: builds on the GPU step
    text: steps/a.md
    solve:
      - command: [python, -c, "open('d.txt', 'w').write('x')"]
    checks:
      - {{type: file-exists, path: d.txt, message: d.txt missing}}
"""


def make(tmp_path: Path) -> Path:
    root = tmp_path / "labs" / "skipwhy-demo"
    (root / "steps").mkdir(parents=True)
    (root / "steps" / "a.md").write_text("do it\n")
    (root / "scenario.yaml").write_text(SCENARIO)
    return root


def test_each_skipped_step_says_its_own_reason_and_the_list_agrees(
        tmp_path: Path, state: Path) -> None:
    """The TrainJob lab's shape: a step for an extra, then a GPU step. The GPU step said
    "(as above)" -- the SDK's reason -- and the list said "steps 1-3 run here"."""
    make(tmp_path)
    env = {"KFLAB_SCENARIOS": str(tmp_path / "labs"), "CUDA_VISIBLE_DEVICES": ""}
    run = run_kflab("scenario", "run", "skipwhy-demo", cwd=REPO, env=env, timeout=300)
    out = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "- skipped: needs the Kubeflow SDK: bash scripts/setup.sh local,sdk" in out, out
    assert "- skipped: needs 64 GPUs (0 GPU(s) on the local backend" in out, out
    assert out.count("skipped (as above)") == 1, out  # step 4 only: step 3's very reason
    assert "step sdk skipped, needs the Kubeflow SDK: bash scripts/setup.sh local,sdk" in out
    assert "step gpu, after-gpu skipped, needs 64 GPUs" in out, out

    listed = run_kflab("scenario", "list", "--json", cwd=REPO, env=env)
    row = next(r for r in json.loads(listed.stdout) if r["id"] == "skipwhy-demo")
    said = " ".join(row["cannot_run_here"].split())
    assert said.startswith("step 1 runs here; step 2 (needs an extra) needs the Kubeflow SDK; "
                           "step 3 (needs many GPUs) needs 64 GPUs (0 GPU(s) here"), said
    assert said.endswith("step 4 builds on step 3; step 2 runs here "
                         "with the sdk extra: bash scripts/setup.sh local,sdk"), said
    assert row["runs_partly_here"] is True


def test_an_extra_is_named_only_by_a_need_that_imports(tmp_path: Path) -> None:
    root = make(tmp_path)
    text = SCENARIO.replace("extra: sdk", "extra: sdkk")
    (root / "scenario.yaml").write_text(text)
    with pytest.raises(LabError, match=r"(?s)needs\[0\]\.extra': kflab has no extra 'sdkk'.*"
                                      r"did you mean 'sdk'"):
        load_scenario(root)
    text = SCENARIO.replace("      - {type: gpus, min: 64, message: needs 64 GPUs}",
                            "      - {type: gpus, min: 64, extra: tf, message: needs GPUs}")
    (root / "scenario.yaml").write_text(text)
    with pytest.raises(LabError, match="only a need that imports modules can name an extra"):
        load_scenario(root)


def hide(monkeypatch: pytest.MonkeyPatch, *tops: str) -> None:
    """A MOCK of the import check (availability._missing): this machine has every extra
    installed, and a learner's machine without one cannot be made here otherwise."""
    real = availability._missing
    monkeypatch.setattr(availability, "_missing",
                        lambda m: m.split(".")[0] in tops or real(m))


@pytest.mark.parametrize(("lab", "tops", "extra", "need"), [
    ("distributed-training-tf", ("tensorflow",), "tf", "needs TensorFlow on this machine"),
    ("notebook-to-pipeline", ("jupyterlab", "nbformat"), "notebooks",
     "needs JupyterLab on this machine"),
])
def test_without_an_extra_the_list_and_the_demo_skip_the_same_steps(
        lab: str, tops: tuple[str, ...], extra: str, need: str, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The list said "steps 2-3 run here"; the demo skipped all three (0/3)."""
    hide(monkeypatch, *tops)
    monkeypatch.chdir(REPO)
    listed = CliRunner().invoke(cli, ["scenario", "list", "--json"])
    row = next(r for r in json.loads(listed.output) if r["id"] == lab)
    assert row["runs_partly_here"] is False
    assert row["cannot_run_here"] == (
        f"step 1 ({find(lab).steps[0].title}) {need}; steps 2-3 build on step 1; "
        f"steps 1-3 run here with the {extra} extra: bash scripts/setup.sh local,{extra}")
    result = run_scenario(find(lab), state)
    assert [s.status for s in result.steps] == ["skipped"] * 3
    assert {s.skip_reason for s in result.steps} == \
        {f"{need}: bash scripts/setup.sh local,{extra}"}
    assert result.status == "skipped"


def test_one_helper_gives_the_advice_by_how_kflab_is_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert deps.install_extras("notebooks") == "bash scripts/setup.sh local,notebooks"
    assert deps.install_extras("tf", "sdk", "tf") == "bash scripts/setup.sh local,tf,sdk"
    monkeypatch.chdir(tmp_path)
    assert deps.install_extras("tf") == f"cd {content.clone()} && bash scripts/setup.sh local,tf"
    # MOCKS: a wheel install (no scripts/setup.sh beside the package) and pip's record of
    # where it came from (PEP 610's direct_url.json) cannot exist in this checkout's venv.
    monkeypatch.setattr(content, "clone", lambda: None)
    recorded: dict[str, str | None] = {"direct_url.json": None}
    monkeypatch.setattr(deps.metadata, "distribution",
                        lambda name: SimpleNamespace(read_text=recorded.get))
    assert deps.install_extras("sdk") == "pip install 'kflab[sdk]'"  # from an index
    recorded["direct_url.json"] = json.dumps({"url": "file:///tmp/w/kflab-0.1.0-py3-none-any.whl",
                                              "archive_info": {}})
    assert deps.install_extras("sdk") == \
        "pip install 'kflab[sdk] @ file:///tmp/w/kflab-0.1.0-py3-none-any.whl'"


def test_no_message_writes_its_own_advice_for_an_extra() -> None:
    """Every message about tf, notebooks or sdk gets its command from deps.install_extras."""
    advice = re.compile(r"kflab\[(tf|notebooks|sdk)|setup\.sh local,")
    found = [f"{p.relative_to(REPO)}:{n}"
             for p in [*(REPO / "lab").rglob("*.py"), *(REPO / "scenarios").rglob("*.yaml")]
             if p.name != "deps.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if advice.search(line)]
    assert found == []
