"""`kflab version` / `kflab --version`: kflab, the engines it drives and the pinned cluster
components, read from metadata without importing the engines (so it stays fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

from lab import __version__, about
from lab.components.catalog import load
from tests.conftest import REPO, run_kflab


def test_version_names_engines_and_pins() -> None:
    res = run_kflab("version", "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["kflab"] == __version__
    for name in ("kfp", "optuna", "torch", "kserve", "ansible-core", "kubernetes"):
        assert info["engines"][name] == metadata.version(name)
    cat = load()
    assert info["components"]["k3s"] == cat.artifacts["k3s"].version
    for comp in cat.components:
        assert info["components"][comp.name] == comp.version
    assert info["content"] == str(REPO)


def test_dash_dash_version_prints_the_same_report() -> None:
    long, short = run_kflab("version"), run_kflab("--version")
    assert long.returncode == short.returncode == 0
    assert short.stdout == long.stdout
    assert short.stdout.startswith(f"kflab {__version__}")
    assert "kserve" in short.stdout and "cert-manager" in short.stdout


def test_an_absent_engine_reads_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(about.ENGINES, "kflab-no-such-distribution", "nothing")
    assert about.about().engines["kflab-no-such-distribution"] == "not installed"


def test_version_imports_no_engine() -> None:
    code = ("import sys\nsys.argv = ['kflab', '--version']\nfrom lab.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', [m for m in ('torch', 'kfp', 'optuna', 'kserve', 'kubernetes',"
            " 'ansible') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=60, check=True).stdout
    assert "LOADED []" in out, out
