"""A broken or incomplete environment is said as such -- the package, its extra, the command
that repairs it -- never as "a bug in kflab" (issue 33 Why 5); kflab's own bugs still are.

Each case runs the real CLI in a real environment that lacks or breaks one package: the
venv's own site-packages seen through a folder of symbolic links (`python -S`, the folder on
PYTHONPATH) with that package's entry left out, replaced by a package that does not import,
or with its installed metadata saying another version (what pip leaves after another tool
downgraded it); nothing in the venv itself changes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SITE = Path(sysconfig.get_paths()["purelib"])


def _overlay(tmp: Path, leave_out: tuple[str, ...] = (),
             replace: dict[str, dict[str, str]] | None = None) -> Path:
    """site-packages as links, without the entries whose name starts with one of
    `leave_out` (module and dist-info), with `replace` (name -> {file: text}) as real
    folders."""
    out = tmp / "site"
    out.mkdir()
    for entry in SITE.iterdir():
        if entry.suffix == ".pth" or entry.name.lower().startswith(leave_out):
            continue
        if replace and entry.name in replace:
            continue
        (out / entry.name).symlink_to(entry)
    for name, files in (replace or {}).items():
        (out / name).mkdir()
        for file, text in files.items():
            (out / name / file).write_text(text)
    return out


def _kflab(site: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{REPO}", KFLAB_STATE=str(tmp / "state"),
               TMPDIR=str(tmp), COLUMNS="200")
    return subprocess.run([sys.executable, "-S", "-m", "lab.cli", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _notebook(tmp: Path) -> Path:
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["step:load"]},
                     "source": "x = 1\n", "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp / "nb.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_the_control_environment_compiles_a_notebook(tmp_path: Path) -> None:
    """The same overlay with nothing left out works: a failure below is the package's."""
    pytest.importorskip("nbformat")
    site = _overlay(tmp_path)
    done = _kflab(site, tmp_path, "notebook", "compile", str(_notebook(tmp_path)))
    assert "bug in kflab" not in done.stderr and "not installed" not in done.stderr, \
        done.stderr


def test_a_missing_extra_names_the_extra_and_the_command(tmp_path: Path) -> None:
    site = _overlay(tmp_path, leave_out=("nbformat",))
    done = _kflab(site, tmp_path, "notebook", "compile", str(_notebook(tmp_path)))
    assert done.returncode == 2, done.stderr
    assert "bug in kflab" not in done.stderr and "Traceback" not in done.stderr
    text = " ".join(done.stderr.split())
    assert "error: nbformat is not installed: it comes with kflab's `notebooks` extra" in text
    fix = re.search(r"fix: (.*)", text)
    assert fix and "bash scripts/setup.sh" in fix.group(1) and "notebooks" in fix.group(1)


def test_a_dependency_that_does_not_import_is_named_for_every_command(tmp_path: Path) -> None:
    """click replaced by a broken copy: the command tree itself cannot load."""
    site = _overlay(tmp_path, replace={"click": {"__init__.py": "from click.core import X\n"}})
    for args in (["version"], ["scenario", "list"], ["get", "runs"]):
        done = _kflab(site, tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        text = " ".join(done.stderr.split())
        assert "bug in kflab" not in text and "Traceback" not in text, text
        assert "error: kflab's environment is damaged: click" in text and \
            "does not import" in text, text
        assert "fix:" in text and "bash scripts/setup.sh" in text, text


def test_a_downgraded_dependency_is_named_with_what_kflab_needs(tmp_path: Path) -> None:
    """jmespath's installed metadata says 0.9.0 (kflab needs >=1.0), and a command fails on
    an error kflab did not foresee: the version is the cause told, not a bug in kflab."""
    info = next(SITE.glob("jmespath-*.dist-info"))
    copy = tmp_path / "dist"
    shutil.copytree(info, copy / info.name)
    meta = copy / info.name / "METADATA"
    meta.write_text(re.sub(r"(?m)^Version: .*$", "Version: 0.9.0", meta.read_text()))
    site = _overlay(tmp_path, leave_out=("jmespath-",))
    (site / info.name).symlink_to(copy / info.name)
    code = ("import sys; sys.argv = ['kflab', 'boom']\n"
            "from lab.cli.root import cli\n"
            "@cli.command('boom')\n"
            "def boom():\n"
            "    import jmespath; jmespath.search('a.b', {'a': 1}).missing\n"
            "from lab import cli as entry; entry.main()\n")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}", "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, text
    assert "kflab's environment is damaged: jmespath 0.9.0 installed, kflab needs " \
        "jmespath>=1.0" in text and "bug in kflab" not in text, text


def test_kflabs_own_import_error_is_still_a_bug(tmp_path: Path) -> None:
    code = ("import sys; sys.argv = ['kflab', 'boom']\n"
            "from lab.cli.root import cli\n"
            "@cli.command('boom')\n"
            "def boom():\n"
            "    from lab import no_such_module\n"
            "from lab import cli as entry; entry.main()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 70 and "this is a bug in kflab" in done.stderr, done.stderr
