"""A lab's guided loop as a learner runs it (issue 33): not root, a HOME of their own with the
state folder in its default place (~/.kflab), bytecode written, nothing of this machine's
environment (env -i: PATH, HOME, LANG, an 80-column terminal size), the installed `kflab`.
start, check (fails, says what is missing), a wrong attempt (a run under another name), check,
hint, solve (runs the reference, checks, moves on), status, the next step's check. The bugs this
catches hid behind root and PYTHONDONTWRITEBYTECODE=1: a file written as root in the learner's
folder, a replay keyed on source files while the interpreter read __pycache__.

As root (CI) the loop runs as the user `kflab-learner` (made with useradd when missing) through
runuser; as anyone else it runs as that user. The venv and the checkout must be readable by
that user: a venv made from pyenv's Python under /root is not (CI makes it from /usr/bin/python3),
which is a skip, said so."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]
USER = "kflab-learner"
KFLAB = REPO / ".venv" / "bin" / "kflab"


def _user() -> tuple[list[str], int]:
    """(the argv prefix that runs a command as the learner, their uid)."""
    if os.geteuid() != 0:
        return [], os.geteuid()
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        if not shutil.which("useradd"):
            pytest.skip("running as root and no useradd to make a non-root learner")
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/bash",
                        "--comment", "kflab test learner", USER], check=True, timeout=60)
        pw = pwd.getpwnam(USER)
    return ["runuser", "-u", USER, "--"], pw.pw_uid


@pytest.fixture(scope="module")
def learner() -> Iterator[dict]:
    if not KFLAB.exists():
        pytest.skip(f"{KFLAB} missing: run scripts/setup.sh")
    prefix, uid = _user()
    home = Path(tempfile.mkdtemp(prefix="kflab-learner-home-"))
    try:
        os.chmod(home, 0o755)
        if prefix:
            os.chown(home, uid, -1)
        env = {"PATH": f"{KFLAB.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
               "LANG": "C.UTF-8", "COLUMNS": "80", "LINES": "24", "TERM": "xterm",
               "USER": USER, "LOGNAME": USER}
        probe = subprocess.run([*prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                str(KFLAB.parent / "python"), "-c", "import lab"],
                               capture_output=True, text=True, timeout=120, check=False)
        if probe.returncode != 0:
            pytest.skip(f"the venv cannot be run by a non-root user ({probe.stderr.strip()[-200:]}"
                        "): make it from /usr/bin/python3, as .ci/run does")
        yield {"prefix": prefix, "uid": uid, "home": home, "env": env}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def as_learner(ctx: dict, *args: str, cwd: Path | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ctx["prefix"], "env", "-i", *(f"{k}={v}" for k, v in
                                                          ctx["env"].items()), *args],
                          cwd=cwd or ctx["home"], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_guided_loop_as_a_learner(learner: dict) -> None:
    home: Path = learner["home"]
    start = as_learner(learner, "kflab", "scenario", "start", "pipeline-classifiers")
    assert start.returncode == 0, start.stdout + start.stderr
    work = home / "pipeline-classifiers"
    assert (work / "pipeline.py").is_file() and (home / ".kflab").is_dir()

    first = as_learner(learner, "kflab", "check", cwd=work)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "No successful run named 'first-run' yet" in first.stdout

    # The wrong attempt: the pipeline runs, under a name the step does not ask for.
    wrong = as_learner(learner, "kflab", "pipeline", "run", "pipeline.py", "--name", "first",
                       cwd=work)
    assert wrong.returncode == 0, wrong.stdout + wrong.stderr
    again = as_learner(learner, "kflab", "check", cwd=work)
    assert again.returncode == 1 and "No successful run named 'first-run' yet" in again.stdout

    hint = as_learner(learner, "kflab", "hint", cwd=work)
    assert hint.returncode == 0 and "kflab pipeline run pipeline.py --name first-run" in \
        " ".join(hint.stdout.split()), hint.stdout + hint.stderr

    solve = as_learner(learner, "kflab", "solve", cwd=work)
    assert solve.returncode == 0, solve.stdout + solve.stderr
    assert "Step 'Run your first pipeline' passed." in solve.stdout  # solve checks, moves on
    status = as_learner(learner, "kflab", "scenario", "status", cwd=work)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "1/3 steps done" in status.stdout and "solved (kflab solve)" in status.stdout
    # The next step's check: nothing done there yet, and it says what is missing.
    nxt = as_learner(learner, "kflab", "check", cwd=work)
    assert nxt.returncode == 1 and "No successful run named 'five-models' yet" in nxt.stdout, \
        nxt.stdout + nxt.stderr

    # Bytecode is written where the learner's own modules live, as on a laptop (kflab itself
    # compiles a pipeline's modules from source: replay.SourceOnly), so the learner's own
    # `python -c "import components"` leaves a .pyc; a run after an edit is still a new run.
    tried = as_learner(learner, str(KFLAB.parent / "python"), "-c", "import components",
                       cwd=work)
    assert tried.returncode == 0, tried.stdout + tried.stderr
    assert list((work / "__pycache__").glob("components.*.pyc")), sorted(
        p.name for p in work.rglob("*"))
    pipe = work / "pipeline.py"
    as_learner(learner, "kflab", "pipeline", "run", "pipeline.py", "--name", "first", cwd=work)
    edited = as_learner(learner, "sh", "-c", "echo 'syntax error (' >> pipeline.py", cwd=work)
    assert edited.returncode == 0, edited.stderr
    stale = as_learner(learner, "kflab", "pipeline", "run", "pipeline.py", "--name", "first",
                       cwd=work)
    assert stale.returncode != 0 and "SUCCEEDED" not in stale.stdout, stale.stdout
    assert "pipeline.py" in stale.stdout + stale.stderr, stale.stdout + stale.stderr
    assert pipe.read_text().endswith("syntax error (\n")
    # Everything in the learner's HOME is theirs: nothing was written as another user.
    strangers = [str(p) for p in [home, *home.rglob("*")]
                 if p.lstat().st_uid != learner["uid"]]
    assert not strangers, strangers[:10]
