"""User data is never read as terminal markup: `/data/[/raw]` in a run argument, a log line,
a trial parameter, a name or an error message prints as written and breaks nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.kube.kinds import lookup
from lab.term import checks, tables
from lab.term import console as term_console
from lab.term.progress import Progress

HOSTILE = ["/data/[/raw]", "[bold red]boom[/]", "[link=file:///etc/passwd]x[/link]",
           ":warning: [/]", "\x1b[2Jcleared", "back\\", "[red]"]


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The kflab console, writing to a buffer (a real rich Console, no terminal)."""
    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr(term_console, "_console", Console(file=buf, highlight=False, emoji=False,
                                               width=300, color_system=None))
    return buf


def _shown(value: str) -> str:
    # control characters are shown as \xNN, the rest as written
    return term_console.printable(value)


def test_progress_events_print_user_values_literally(screen: io.StringIO) -> None:
    progress = Progress()
    result = SimpleNamespace(ok=False, label=HOSTILE[0], observed=HOSTILE[1],
                             message=HOSTILE[2], error=HOSTILE[3], skip_reason=HOSTILE[4])
    for value in HOSTILE:
        progress({"event": "step-started", "step": value, "title": value})
        progress({"event": "action", "verb": "pipeline", "args": {"file": value, "name": value}})
        progress({"event": "run-started", "run": value, "tasks": [value]})
        progress({"event": "task-started", "task": value})
        progress({"event": "task-finished", "task": value, "state": "SUCCEEDED"})
        progress({"event": "log", "replica": value, "line": value})
        progress({"event": "message", "text": value})
    progress({"event": "check", "result": result})
    progress({"event": "step-finished", "result": result})
    out = screen.getvalue()
    for value in HOSTILE:
        assert _shown(value) in out
    assert "\x1b" not in out


def test_trial_table_and_resource_table(screen: io.StringIO) -> None:
    progress = Progress()
    progress({"event": "experiment-started", "experiment": "e", "algorithm": "[/x]",
              "max_trials": 1, "parallel": 1, "metric": "[/m]", "params": ["[/p]"]})
    progress({"event": "trial-started", "trial": "t-[/1]", "params": {"[/p]": "/data/[/raw]"}})
    progress({"event": "trial-finished", "trial": "t-[/1]", "state": "Failed",
              "objective": "[/o]", "seconds": 1.0, "detail": "[bold]why[/bold]"})
    progress({"event": "experiment-finished", "experiment": "e", "condition": "Succeeded",
              "reason": "[/r]", "best": "t-[/1]",
              "assignments": [{"name": "[/p]", "value": "/data/[/raw]"}],
              "plots": "/tmp/[/a].png"})
    tables.resource_table(lookup("runs"), [{"metadata": {"name": "[/n]", "namespace": "[/ns]"},
                                         "status": {"state": "[red]X"}}], namespaces=True)
    out = screen.getvalue()
    for value in ("[/x]", "[/m]", "t-[/1]", "[/o]", "[bold]why[/bold]", "/data/[/raw]",
                  "[/r]", "/tmp/[/a].png", "[/n]", "[/ns]", "[red]X"):
        assert value in out


def test_checks_and_warnings(screen: io.StringIO) -> None:
    checks.check_lines([SimpleNamespace(ok=True, label="[/ok]", message="", observed=""),
                    SimpleNamespace(ok=False, label="[/l]", message="[/m]", observed="[/o]")])
    checks.apply_warnings(['f.yaml:3: unknown field "spec.[/raw]"'])
    out = screen.getvalue()
    for value in ("[/ok]", "[/l]", "[/m]", "[/o]", 'unknown field "spec.[/raw]"'):
        assert value in out


WRITER = """\
from kfp import dsl

@dsl.component(packages_to_install=[], install_kfp_package=False)
def show(path: str) -> str:
    print("reading", path, "[bold]not bold[/bold]")
    return path

@dsl.pipeline(name="markup")
def markup(path: str = "/data/[/raw]"):
    show(path=path)
"""


def test_a_pipeline_run_with_markup_in_its_arguments(kflab, state, tmp_path: Path) -> None:
    """A markup-like argument reaches the component and its log unchanged."""
    (tmp_path / "markup.py").write_text(WRITER)
    out = kflab("pipeline", "run", str(tmp_path / "markup.py"), "--name", "markup",
                "-p", "path=/data/[/raw]")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    run = json.loads(kflab("get", "run", "markup", "-o", "json").stdout)
    assert run["status"]["state"] == "SUCCEEDED"
    logs = kflab("logs", "run", "markup").stdout
    assert "reading /data/[/raw] [bold]not bold[/bold]" in logs
    table = kflab("get", "runs").stdout
    assert "markup" in table and "SUCCEEDED" in table


def test_markup_in_an_error_message(kflab, state, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata: {name: x}\n"
                   "spec:\n  objective: {type: minimize, objectiveMetricName: loss}\n"
                   "  algorithm: {algorithmName: '[/raw]'}\n")
    out = kflab("apply", "-f", str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "unknown algorithm '[/raw]'" in out.stderr


SCENARIO = """\
id: markup
title: "Markup [/raw] in a title"
level: beginner
duration: 1m
steps:
  - id: one
    title: "Write /data/[/raw]"
    text: steps/one.md
    solve:
      - command: [python3, -c, "open('out.txt', 'w').write('/data/[/raw]')", "/data/[/raw]"]
    checks:
      - type: file-exists
        title: "out.txt holds /data/[/raw]"
        path: out.txt
        contains: "/data/\\\\[/raw\\\\]"
        timeout: 1
        message: "out.txt must hold /data/[/raw] [bold]"
"""


def test_a_scenario_run_with_markup_in_its_steps(kflab, state, tmp_path: Path) -> None:
    """The issue's repro: a `/data/[/raw]` argument in a solve action was read as a closing
    tag by rich and the run died (MarkupError) before its checks."""
    folder = tmp_path / "markup"
    (folder / "steps").mkdir(parents=True)
    (folder / "steps/one.md").write_text("# Write it\n")
    (folder / "scenario.yaml").write_text(SCENARIO)
    out = kflab("scenario", "test", str(folder))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "MarkupError" not in out.stderr
    assert "▶ one: Write /data/[/raw]" in out.stdout
    # the fail-before phase of `scenario test` says what it found
    assert "before the solution: 1 check(s) fail, as they must" in out.stdout
    assert "/data/[/raw]" in out.stdout.split("command", 1)[1]
    assert "✔ out.txt holds /data/[/raw]" in out.stdout


def test_a_skip_reason_is_said_once_per_lab(screen: io.StringIO) -> None:
    """A lab whose steps all need a GPU: the reason once, then `(as above)` (issue 20: it was
    printed once per step and again for the lab)."""
    progress = Progress()
    for step in ("a", "b", "c"):
        progress({"event": "step-started", "step": step, "title": step})
        progress({"event": "step-finished",
                  "result": SimpleNamespace(error=None, skip_reason="needs an NVIDIA GPU")})
    out = screen.getvalue()
    assert out.count("needs an NVIDIA GPU") == 1
    assert out.count("skipped (as above)") == 2
    assert progress.said_skips == {"needs an NVIDIA GPU"}
