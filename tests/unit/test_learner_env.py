"""The tests run as a learner's shell does (issue 33): this machine sets PYTHONDONTWRITEBYTECODE,
PYTHONUNBUFFERED, PIP_FIND_LINKS and BLAS variables and runs pyenv's Python as root; a learner's
laptop does none of that, and a replay bug that shows only with bytecode written went unseen.
scripts/learner-env.sh (sourced by scripts/test.sh) and .ci/run are run here for real, in bash,
with those variables set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

MACHINE = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PIP_FIND_LINKS": "/opt/wheels", "PIP_DEFAULT_TIMEOUT": "180",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "OPENBLAS_NUM_THREADS": "1",
           "NVPL_BLAS_DEBUG_CPU_TYPE": "1", "PYTHONPATH": "/somewhere"}


def _env_after(script: str, env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(["bash", "-c", f"set -euo pipefail; {script} >/dev/null; env -0"],
                         cwd=REPO, env=env, capture_output=True, check=True, timeout=60).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def test_learner_env_drops_what_a_laptop_does_not_set() -> None:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", **MACHINE,
           "PIP_INDEX_URL": "https://mirror.example/simple", "PIP_CERT": "/etc/ssl/ca.pem"}
    after = _env_after("source scripts/learner-env.sh", env)
    assert not set(MACHINE) & set(after), sorted(set(MACHINE) & set(after))
    assert after["KFLAB_TORCH_FIND_LINKS"] == "/opt/wheels"  # for torch alone
    assert after["PIP_INDEX_URL"] == "https://mirror.example/simple"  # access, kept
    assert after["PIP_CERT"] == "/etc/ssl/ca.pem"
    assert after["KFLAB_LEARNER_ENV"] == "1"


def test_ci_runs_the_readme_command_with_debian_python_and_an_empty_home(tmp_path: Path) -> None:
    """.ci/run in a copy of the repository whose scripts/test.sh reports what it was given."""
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 here")
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(REPO / ".ci" / "run", repo / ".ci" / "run")
    (repo / "scripts" / "test.sh").write_text(
        'echo "args=$*"; echo "python3=$(command -v python3)"; echo "home=$HOME"; '
        'ls -A "$HOME" | wc -l; env | sort\n')
    env = {**os.environ, **MACHINE, "KFLAB_WORKERS_NOTE": "kept"}
    res = subprocess.run(["bash", str(repo / ".ci" / "run")], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    got = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("=="))
    assert got["args"] == "-p no:cacheprovider"
    assert got["python3"] == "/usr/bin/python3"  # pyenv's shims are not on PATH
    assert got["home"].startswith("/tmp/kflab-ci-home.") and not Path(got["home"]).exists()
    assert "0" in lines  # the HOME it got was empty
    assert not set(MACHINE) & set(got), sorted(set(MACHINE) & set(got))
    assert got["KFLAB_TORCH_FIND_LINKS"] == (env.get("KFLAB_TORCH_FIND_LINKS") or
                                             env["PIP_FIND_LINKS"])  # torch's wheelhouse
    assert got["KFLAB_WORKERS_NOTE"] == "kept"  # the project's own knobs pass
    # pip's download cache stays the caller's own (a laptop keeps one), outside the empty HOME
    assert got["PIP_CACHE_DIR"] == env.get("PIP_CACHE_DIR",
                                           f"{os.environ['HOME']}/.cache/pip")
    assert set(got) <= {"args", "python3", "home", "PATH", "HOME", "LANG", "TERM", "USER",
                        "LOGNAME", "PWD", "SHLVL", "OLDPWD", "_", "SSL_CERT_FILE",
                        "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
                        "PIP_CACHE_DIR"} | {
        k for k in got if k.startswith("KFLAB_")}, sorted(got)


def test_this_run_writes_bytecode_as_a_learner_does(tmp_path: Path) -> None:
    """Under scripts/test.sh (and so CI): nothing suppresses bytecode or buffers differently,
    in this process or in the processes the tests start."""
    if os.environ.get("KFLAB_LEARNER_ENV") != "1":
        pytest.skip("checks the environment of scripts/test.sh, which this run did not go "
                    "through")
    assert not sys.dont_write_bytecode
    assert not set(MACHINE) & set(os.environ), sorted(set(MACHINE) & set(os.environ))
    (tmp_path / "mod_here.py").write_text("X = 1\n")
    subprocess.run([sys.executable, "-c", "import mod_here"], cwd=tmp_path, check=True,
                   env={k: v for k, v in os.environ.items()}, timeout=60)
    assert list((tmp_path / "__pycache__").glob("mod_here.*.pyc"))


pytest_plugins = ["pytester"]


def test_kflab_settings_of_the_callers_shell_do_not_reach_the_tests(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A contributor's mirror or backend (KFLAB_GITHUB_URL, KFLAB_BACKEND) would change what the
    product does under every test (one test failed so in a run with a loopback mirror set):
    tests start from the defaults; the suite's own knobs (KFLAB_SHARED, KFLAB_TEST_*) pass."""
    monkeypatch.setenv("KFLAB_GITHUB_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("KFLAB_BACKEND", "cluster")
    monkeypatch.setenv("KFLAB_TEST_WORKERS", "2")
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_env="""
import os, subprocess, sys

def test_env():
    assert "KFLAB_GITHUB_URL" not in os.environ and "KFLAB_BACKEND" not in os.environ
    assert os.environ["KFLAB_TEST_WORKERS"] == "2"
    code = "import os; print(os.environ.get('KFLAB_BACKEND'))"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert child == "None"
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == 0, res.outlines[-20:]
