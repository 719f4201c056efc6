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
