"""Issue 33's learner-facing points in a real terminal at 80 columns (tmux, as
test_tmux_walkthrough.py drives it), in a shell as a learner's: bytecode written (no
PYTHONDONTWRITEBYTECODE), no PYTHONUNBUFFERED.

- the replay sequence: run a pipeline, edit the module it imports, run, run (replayed), then
  break only the pipeline file: a failed run naming the file and line, never SUCCEEDED;
- `kflab doctor` fits the terminal; piped, it is plain text;
- `kflab scenario list` says which steps of the TrainJob lab run here."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_tmux_walkthrough import REPO, Terminal, _wrapped_by_the_terminal

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux not installed (scripts/standins/60-tmux.sh)")

COMP = '''from kfp import dsl

B = 2


@dsl.component(install_kfp_package=False)
def add(a: int, b: int) -> int:
    return a + b
'''
PIPE = '''from kfp import dsl
from comp import B, add


@dsl.pipeline(name="pipe")
def pipe():
    add(a=1, b=B)
'''


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home),
           "TERM": "xterm-256color", "LANG": "C.UTF-8", "KFLAB_STATE": str(tmp_path / "state"),
           "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    t = Terminal(home, env)
    try:
        yield t
    finally:
        t.close()


def test_the_replay_is_never_stale_in_a_learners_terminal(term: Terminal) -> None:
    (term.home / "comp.py").write_text(COMP)
    (term.home / "pipe.py").write_text(PIPE)
    term.open("t", 80)
    show = ("kflab get run pipe 2>/dev/null -o jsonpath='{.status.run_details"
            ".task_details[0].outputs.parameters.Output}'; echo")
    rc, out, _ = term.type("t", "kflab pipeline run pipe.py")
    assert rc == 0 and "pipelinerun/pipe SUCCEEDED" in out, out
    assert term.type("t", show)[1].strip() == "3"
    term.type("t", "sed -i 's/^B = 2/B = 5/' comp.py")
    rc, out, _ = term.type("t", "kflab pipeline run pipe.py")
    assert rc == 0 and "task add SUCCEEDED" in out, out  # ran, not replayed
    assert term.type("t", show)[1].strip() == "6"
    rc, out, _ = term.type("t", "kflab pipeline run pipe.py")
    assert rc == 0 and "task add SKIPPED (cached" in out and "task add SUCCEEDED" not in \
        out and "pipelinerun/pipe SUCCEEDED" in out, out  # replayed: every task from the cache
    term.type("t", "echo 'syntax error (' >> pipe.py")
    rc, out, _ = term.type("t", "kflab pipeline run pipe.py")
    assert rc == 2, out
    assert "SUCCEEDED" not in out
    assert "error: pipe.py:8: SyntaxError: '(' was never closed" in " ".join(out.split()), out
    term.type("t", "sed -i 's/^syntax error ($//; s/b=B)/b=B * 10)/' pipe.py")
    rc, out, _ = term.type("t", "kflab pipeline run pipe.py")
    assert rc == 0 and "task add SUCCEEDED" in out, out
    assert term.type("t", show)[1].strip() == "51"
    assert not _wrapped_by_the_terminal(term, "t")


def test_doctor_fits_80_columns_and_is_plain_when_piped(term: Terminal) -> None:
    term.open("d", 80)
    _, out, _ = term.type("d", "kflab doctor")
    assert "┃" in out or "│" in out, out  # a table on a terminal
    assert not _wrapped_by_the_terminal(term, "d")
    _, out, _ = term.type("d", "kflab doctor | cat")
    assert not any(ch in out for ch in "┏┃│└━"), out
    assert "CHECK" in out and "RESULT" in out


def test_scenario_list_says_which_steps_run_here_at_80_columns(term: Terminal) -> None:
    term.open("l", 80)
    rc, out, _ = term.type("l", "kflab scenario list")
    assert rc == 0, out
    text = " ".join(out.split())
    assert "distributed-training-trainjob on this machine: steps 1-4 run here; step 5" in \
        text, out
    assert not _wrapped_by_the_terminal(term, "l")


def test_the_step_footer_keeps_each_command_whole_at_80_columns(term: Terminal) -> None:
    """A newcomer saw `where am I:` at the end of one line and `kflab scenario status` on the
    next: at 80 columns the footer goes on two lines, each command whole."""
    term.open("f", 80)
    rc, out, _ = term.type("f", "kflab scenario start pipeline-classifiers --workdir pc")
    assert rc == 0, out
    lines = term.screen("f").splitlines()
    assert any("where am I: kflab scenario status" in line for line in lines), out
    assert any("When done: kflab check" in line and "stuck: kflab hint" in line
               for line in lines), out
    assert not _wrapped_by_the_terminal(term, "f")
