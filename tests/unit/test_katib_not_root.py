"""Katib's File-collector examples on a learner's machine, where kflab does not run as root
(issue 33 Why 6): a collector path whose folder cannot be made (/katib at the top of the
file system) is refused at apply, in one error naming the field and the fix, before any
trial runs -- not after maxFailedTrialCount trials failing the same way.

Run for real as the unprivileged user `nobody` with Debian's /usr/bin/python3 (this
machine's venv lives under /root, which nobody cannot read; its site-packages are on
PYTHONPATH, the same cp311 wheels)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.unit.tuning_helpers import TRIAL, container, experiment

REPO = Path(__file__).resolve().parents[2]
SITE = next(p for p in sys.path if p.endswith("site-packages"))
PYTHON = "/usr/bin/python3"

as_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(PYTHON),
    reason="needs root to switch to the user nobody (setpriv) and Debian's /usr/bin/python3")


@pytest.fixture()
def shared_tmp() -> Iterator[Path]:
    """A folder nobody can use (pytest's own tmp folder is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="kflab-nobody-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_nobody(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(cwd), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "80",
           "PYTHONPATH": f"{SITE}{os.pathsep}{REPO}", "KFLAB_STATE": str(cwd / "state")}
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           PYTHON, "-m", "lab.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@as_root
def test_a_collector_folder_nobody_can_make_is_refused_at_apply(shared_tmp: Path) -> None:
    top = Path(f"/kflab-test-{uuid.uuid4().hex[:8]}")
    assert not top.exists()
    obj = experiment(maxTrialCount=4, maxFailedTrialCount=3)
    obj["spec"]["metricsCollectorSpec"] = {
        "collector": {"kind": "File"},
        "source": {"fileSystemPath": {"kind": "File", "path": f"{top}/metrics.log"}}}
    container(obj)["command"] = [PYTHON, "trial.py", "--x=${trialParameters.x}",
                                 "--n=${trialParameters.n}"]
    (shared_tmp / "trial.py").write_text(TRIAL)
    (shared_tmp / "exp.yaml").write_text(yaml.safe_dump(obj))
    done = _as_nobody(["apply", "-f", "exp.yaml"], shared_tmp)
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert "spec.metricsCollectorSpec.source.fileSystemPath.path" in text, text
    assert f"{top} does not exist and cannot be made here (/ is not writable by user " \
        "nobody)" in text, text
    assert f"sudo mkdir -p {top}" in text and "no trial would run" in text, text
    assert "trial" not in done.stdout.lower(), done.stdout  # none started
    assert not list((shared_tmp / "state").rglob("*.log")) if (shared_tmp / "state").exists() \
        else True
    assert not top.exists()


def test_the_fidelity_page_says_a_trial_gets_its_own_katib_as_root() -> None:
    """The page (generated from fidelity/rules.py) says when a trial's own folder is
    mounted: only where a private mount namespace works, as root or with user namespaces."""
    rows = [line for line in (REPO / "docs" / "fidelity.md").read_text().splitlines()
            if line.startswith("| File collector") and "private mount namespace" in line]
    assert len(rows) >= 2, rows
    assert any("as root or with user namespaces" in row for row in rows), rows
    assert all("/katib" in row or "absolute" in row for row in rows), rows
