"""`kflab completion SHELL`: the bash script it prints really completes, run in a real bash
with COMP_WORDS set as bash sets them, calling the installed `kflab` console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_kflab

KFLAB = Path(sys.executable).parent / "kflab"  # the console script of this venv


def complete(words: list[str], tmp_path: Path) -> list[str]:
    """What bash offers for the last word of `words`, through the sourced script."""
    if not shutil.which("bash") or not KFLAB.exists():
        pytest.skip("needs bash and the kflab console script (scripts/setup.sh)")
    script = run_kflab("completion", "bash")
    assert script.returncode == 0, script.stderr
    (tmp_path / "kflab.bash").write_text(script.stdout)
    words_q = " ".join(f"'{w}'" for w in words)
    prog = (f"source {tmp_path / 'kflab.bash'}\n"
            f"COMP_WORDS=({words_q}); COMP_CWORD={len(words) - 1}\n"
            "_kflab_completion kflab\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = {**os.environ, "PATH": f"{KFLAB.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_bash_completes_a_subcommand(tmp_path: Path) -> None:
    assert complete(["kflab", "sce"], tmp_path) == ["scenario"]
    assert "start" in complete(["kflab", "scenario", "st"], tmp_path)
    assert complete(["kflab", "completion", "f"], tmp_path) == ["fish"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_use_the_same_protocol(shell: str) -> None:
    res = run_kflab("completion", shell)
    assert res.returncode == 0, res.stderr
    assert "_KFLAB_COMPLETE" in res.stdout and f"{shell}_complete" in res.stdout


def test_an_unknown_shell_is_refused() -> None:
    res = run_kflab("completion", "powershell")
    assert res.returncode == 2 and "powershell" in res.stderr


def test_bash_completes_scenario_ids(tmp_path: Path) -> None:
    assert complete(["kflab", "scenario", "start", "pipeline-c"], tmp_path) == \
        ["pipeline-classifiers"]
    assert "distributed-training-tf" in complete(["kflab", "scenario", "run", "dist"],
                                                 tmp_path)
    assert complete(["kflab", "scenario", "show", "katib"], tmp_path) == ["katib-hpo"]


def test_bash_completes_resource_types_and_names(tmp_path: Path, state: Path) -> None:
    """Names come from the state folder: a real run made here ($KFLAB_STATE, set by the
    `state` fixture, reaches the completion through bash's environment)."""
    made = run_kflab("pipeline", "run", str(Path(__file__).parents[1] / "data" / "pipelines" /
                                            "tiny.py"), "--name", "tiny-one", "-p", "n=2")
    assert made.returncode == 0, made.stderr
    assert {"runs", "experiments", "trainjobs", "isvc"} <= set(
        complete(["kflab", "get", ""], tmp_path))
    assert complete(["kflab", "get", "ru"], tmp_path) == ["run", "runs"]
    assert complete(["kflab", "get", "runs", ""], tmp_path) == ["tiny-one"]
    assert complete(["kflab", "describe", "run", "ti"], tmp_path) == ["tiny-one"]
    assert complete(["kflab", "logs", "run/t"], tmp_path) == ["run/tiny-one"]
    assert complete(["kflab", "get", "experiments", ""], tmp_path) == []


def test_completion_imports_nothing_heavy(tmp_path: Path) -> None:
    """Every Tab runs kflab: the words come from folder listings, never from kfp, PyYAML,
    rich or a backend."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write(' '.join(sorted(sys.modules))))\n"
            "sys.argv = ['kflab']\n"
            "from lab.cli import main\n"
            "main()\n")
    env = {**os.environ, "_KFLAB_COMPLETE": "bash_complete", "COMP_WORDS": "kflab get runs ",
           "COMP_CWORD": "3", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    loaded = set(res.stderr.split())
    assert "click" in loaded, res.stderr[-500:]
    assert not loaded & {"kfp", "yaml", "rich", "psutil", "lab.backends.local",
                         "lab.scenarios.loader"}, sorted(loaded & {"kfp", "yaml", "rich"})
