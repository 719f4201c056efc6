"""A whole guided scenario driven as a learner drives it, in a real terminal: tmux (installed by
scripts/standins/60-tmux.sh) receives the keystrokes (send-keys) and the test reads the
screen (capture-pane), at 80 columns -- a wrong attempt, a hint, a resume in a new terminal,
the finish summary -- and at 220 columns, where prose must stay readable."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "data" / "scenarios"
PROMPT = re.compile(r"^\[rc=(\d+)\] \$(?: |$)", re.M)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux not installed (scripts/standins/60-tmux.sh)")


class Terminal:
    """One private tmux server; each `session` is a new terminal window of a given width."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.socket = f"kflab-test-{uuid.uuid4().hex[:8]}"
        self.home, self.env = home, env

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=True, timeout=30).stdout

    def open(self, name: str, width: int) -> None:
        """A new terminal: a clean bash whose prompt shows the last exit code."""
        env = [f"{k}={v}" for k, v in self.env.items()]
        shell = ["env", "-i", *env, "PS1=[rc=$?] $ ", "bash", "--norc", "--noprofile"]
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", "50",
                  "-c", str(self.home), " ".join(_quote(a) for a in shell))
        self.tmux("set-option", "-t", name, "history-limit", "20000")
        self.wait_prompt(name, 1)

    def screen(self, name: str, joined: bool = False) -> str:
        """Everything the terminal shows (scrollback included); `joined`: lines the terminal
        itself wrapped are put back together."""
        return self.tmux("capture-pane", "-p", "-t", name, "-S", "-", *(["-J"] if joined
                                                                       else []))

    def wait_prompt(self, name: str, count: int, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen(name)
            if len(PROMPT.findall(text)) >= count:
                return text
            time.sleep(0.1)
        raise AssertionError(f"no prompt after {timeout}s:\n{self.screen(name)}")

    def type(self, name: str, line: str, *, watch: str | None = None) -> tuple[int, str, bool]:
        """Type a command and Enter; return (exit code, what it printed, whether `watch`
        was on screen while it ran)."""
        before = len(PROMPT.findall(self.screen(name)))
        self.tmux("send-keys", "-t", name, "-l", line)
        self.tmux("send-keys", "-t", name, "Enter")
        seen = False
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            text = self.screen(name)
            seen |= bool(watch and watch in text)
            if len(PROMPT.findall(text)) > before:
                break
            time.sleep(0.05)
        joined = self.screen(name, joined=True)
        last = list(PROMPT.finditer(joined))
        output = joined[last[-2].end():last[-1].start()] if len(last) >= 2 else joined
        output = output.split("\n", 1)[1] if "\n" in output else ""
        return int(last[-1].group(1)), output, seen

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       check=False, timeout=30)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(home),
           "TERM": "xterm-256color", "LANG": "C.UTF-8", "KFLAB_STATE": str(tmp_path / "state"),
           "KFLAB_SCENARIOS": str(SCENARIOS), "PYTHONPATH": str(REPO)}
    term = Terminal(home, env)
    try:
        yield term
    finally:
        term.close()


def _wrapped_by_the_terminal(term: Terminal, name: str) -> list[str]:
    """Output lines longer than the terminal (which it wrapped wherever the edge fell)."""
    raw = {line.rstrip() for line in term.screen(name).splitlines()}
    joined = term.screen(name, joined=True).splitlines()  # -J also keeps trailing spaces
    wide = [line for line in joined if line.rstrip() not in raw]
    # typed commands may be long; a path longer than a line cannot be wrapped between words
    return [line for line in wide if not PROMPT.match(line)
            and not any(len(word) > 60 for word in line.split())]


def test_a_learner_at_80_columns(terminal: Terminal) -> None:
    t = terminal
    t.open("one", 80)
    rc, out, _ = t.type("one", "kflab scenario list")
    assert rc == 0 and "hello-files" in out and "pipeline-classifiers" in out
    assert "…" not in out  # no name cut

    rc, out, _ = t.type("one", "kflab scenario start hello-files")
    assert rc == 0 and "step 1/2: Write a greeting" in out and "kflab check" in out

    # a wrong attempt: nothing is running that could change the file, so the check answers
    # at once (no wait), and says what is missing
    rc, _, _ = t.type("one", "cd hello-files && echo goodbye > greeting.txt")
    rc, out, waited = t.type("one", "kflab check", watch="waiting for")
    assert rc == 1 and "✘ file greeting.txt exists" in out
    assert "greeting.txt must contain 'hello'" in out and "kflab hint" in out
    assert not waited and "waiting for" not in out

    rc, out, _ = t.type("one", "kflab hint")
    assert rc == 0 and "Hint 1/2: write hello into greeting.txt" in out

    # a new terminal: where am I, then finish the lab there
    t.open("two", 80)
    rc, out, _ = t.type("two", "kflab scenario status")
    assert rc == 0 and "0/2 steps done" in out and "Now: step 1" in out
    assert "▶ current" in out and "1/2" in out  # one hint of two used
    rc, out, _ = t.type("two", "kflab scenario start hello-files")
    assert "step 1/2" in out and not (t.home / "hello-files" / "hello-files").exists()
    rc, _, _ = t.type("two", "cd hello-files && echo hello > greeting.txt")
    rc, out, _ = t.type("two", "kflab check")
    assert rc == 0 and "Step 'Write a greeting' passed" in out and "step 2/2" in out
    rc, _, _ = t.type("two", "python count.py")
    rc, out, _ = t.type("two", "kflab check")
    assert rc == 0 and "Scenario 'hello-files' complete" in out
    assert "2 passed" in out and "Nothing is left running" in out
    rc, out, _ = t.type("two", "kflab scenario list")
    assert "done" in out

    for name in ("one", "two"):
        assert _wrapped_by_the_terminal(t, name) == []  # kflab wrapped its own lines

    # a real step's code block at 80 columns: the trailing comment stays a comment
    rc, out, _ = t.type("two", "kflab scenario show distributed-training --step 2")
    assert rc == 0 and "│  kflab apply -f pytorchjob.yaml" in out
    assert re.search(r"│  # streams every replica's output, prefixed\s+│", out)
    assert not re.search(r"│\s+prefixed", out)


def test_prose_stays_readable_at_220_columns(terminal: Terminal) -> None:
    t = terminal
    t.open("wide", 220)
    rc, out, _ = t.type("wide", "kflab scenario show pipeline-classifiers --step 1")
    assert rc == 0
    panel = [line for line in out.splitlines() if line.startswith(("╭", "│", "╰"))]
    assert panel and max(len(line.rstrip()) for line in panel) <= 104
    rc, out, _ = t.type("wide", "kflab scenario start hello-files")
    rc, out, _ = t.type("wide", "kflab check --wait 0")
    assert rc == 1
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 120
    rc, out, _ = t.type("wide", "kflab scenario list")
    row = next(line for line in out.splitlines() if line.startswith("hello-files"))
    assert "A two-step scenario for engine tests (files and commands only)" in row


EXPERIMENT = """\
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  name: a-rather-long-experiment-name
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm:
    algorithmName: random
    algorithmSettings: [{name: random_state, value: "3"}]
  parallelTrialCount: 2
  maxTrialCount: 4
  maxFailedTrialCount: 4
  parameters:
    - {name: learning_rate, parameterType: double, feasibleSpace: {min: "0.0001", max: "0.1"}}
    - {name: weight_decay, parameterType: double, feasibleSpace: {min: "0.00001", max: "0.01"}}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
      - {name: lr, reference: learning_rate}
      - {name: wd, reference: weight_decay}
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
              - name: training-container
                image: python:3.11-slim
                command: [python, trial.py, "--lr=${trialParameters.lr}",
                          "--wd=${trialParameters.wd}"]
"""
# Half the trials print no metric: Katib marks them MetricsUnavailable.
TRIAL = """\
import sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
time.sleep(0.5)
if float(args["lr"]) > 0.05:
    print(f"loss={float(args['lr']) * 3.14159265358979:.12f}")
"""


@pytest.mark.slow
def test_the_live_trial_table_and_a_piped_step_at_80_columns(terminal: Terminal) -> None:
    """The live Katib trial table fits 80 columns: parameters and objective rounded to 4
    significant digits (kflab get -o yaml keeps them whole), a state never split; and a step
    piped into another program keeps every word of every paragraph."""
    t = terminal
    (t.home / "exp.yaml").write_text(EXPERIMENT)
    (t.home / "trial.py").write_text(TRIAL)
    t.open("k", 80)
    rc, out, _ = t.type("k", "kflab apply -f exp.yaml")
    assert "TRIAL" in out and "LEARNING_RATE" not in out, out
    table = [line for line in out.splitlines() if "a-rather-long-experiment-name-" in line]
    assert table, out
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines())
    assert _wrapped_by_the_terminal(t, "k") == []
    for line in table:
        for number in re.findall(r"\d+\.\d+(?:e-?\d+)?", line.split("  ", 1)[-1]):
            digits = number.split("e")[0].replace(".", "").lstrip("0")
            assert len(digits) <= 4, (number, line)
    if "MetricsUnavailable" in out:  # whole, on one line
        assert any("MetricsUnavailable" in line for line in table)
    rc, out, _ = t.type("k", "kflab get trials -o yaml | grep -c \"value: '0\\.[0-9]\\{8,\\}\"")
    assert rc == 0 and int(out.strip().splitlines()[-1]) > 0, out  # full values in yaml

    rc, out, _ = t.type("k", "kflab scenario show katib-hpo --step 2 | cat")
    assert rc == 0
    assert "Estimator, the `tpe` algorithm) models which regions gave good accuracy" in out
    assert "before it can model anything (with only 6 trials, its default of 10" in out
    assert "│" not in out  # plain markdown, no panel to cut it
    rc, out, _ = t.type("k", "kflab scenario show katib-hpo --step 2 > step.txt; wc -w step.txt")
    assert int(out.split()[0]) > 100

    # a title too long for the panel's border is shown whole, inside it (read from the
    # screen itself: tmux's joined capture re-flows a panel's box lines)
    t.type("k", "kflab scenario show distributed-training --step 3")
    screen = t.screen("k").rsplit("show distributed-training --step 3", 1)[1]
    assert "│ distributed-training — step 3/3: Compare the single-process and the" in screen
    assert "│ distributed run " in screen
    # a check's message wraps under its own text, never back at column 0
    rc, _, _ = t.type("k", "kflab scenario start kserve-serving >/dev/null; kflab check")
    assert rc == 1
    lines = t.screen("k").rsplit("; kflab check", 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  ✘ file models/v1"))
    assert lines[first + 1].startswith("    ") and lines[first + 1].strip(), lines
    joined = t.screen("k", joined=True).rsplit("; kflab check", 1)[1].splitlines()
    assert all(len(line.rstrip()) <= 80 for line in joined), joined  # kflab wrapped them
