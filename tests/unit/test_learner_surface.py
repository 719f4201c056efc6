"""What a learner reads around the labs, piped (issue 33 Why 7): `scenario list` says which
steps of a lab run here, `open pipelines` on the local backend points to `kflab ui`, and
`doctor` prints plain columns when its output is not a terminal. The same in a real
terminal: tests/integration/test_tmux_learner_surface.py."""

from __future__ import annotations

import json
from pathlib import Path

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # whatever this machine has


def test_scenario_list_says_which_steps_run_here(kflab, state: Path) -> None:
    listed = {s["id"]: s for s in json.loads(kflab("scenario", "list", "--json",
                                                   env=NO_GPU).stdout)}
    tj = listed["distributed-training-trainjob"]
    # the reason for 0 GPUs follows (no driver here, or CUDA_VISIBLE_DEVICES hides them)
    assert tj["cannot_run_here"].startswith("steps 1-4 run here; step 5 (One node with a GPU) "
                                            "needs an NVIDIA GPU (0 GPU(s) here")
    assert tj["runs_partly_here"] is True
    assert listed["gpu-check"]["runs_partly_here"] is False
    table = kflab("scenario", "list", env=NO_GPU).stdout
    row = next(x for x in table.splitlines() if x.startswith("distributed-training-trainjob"))
    assert "(partly here*)" in row and "(not here*)" not in row
    assert "* distributed-training-trainjob on this machine: steps 1-4 run here; step 5" \
        in table
    assert "(not here*)" in next(x for x in table.splitlines() if x.startswith("gpu-check"))


def test_open_pipelines_on_the_local_backend_points_to_kflab_ui(kflab, state: Path) -> None:
    for what in ("pipelines", "katib"):
        done = kflab("open", what, env={"KFLAB_BACKEND": "local"})
        assert done.returncode == 2
        assert "fix: `kflab ui` shows them in the browser" in done.stderr, done.stderr


def test_doctor_piped_prints_plain_columns(kflab) -> None:
    done = kflab("doctor")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kflab doctor (")
    assert lines[1].split() == ["CHECK", "RESULT", "OBSERVED", "ADVICE"]
    assert not any(ch in done.stdout for ch in "┏┃│└━─╇"), done.stdout
    result_at = lines[1].index("RESULT")  # one line per check, RESULT aligned
    results = {line[:result_at].strip(): line[result_at:].split()[0] for line in lines[2:]
               if line.strip()}
    assert results["cpus"] in ("pass", "warn", "fail"), results
    assert results["local backend"] == "pass", results


def test_a_skip_reason_wraps_under_itself_on_a_terminal(monkeypatch) -> None:
    """At 80 columns the demo's `- skipped:` reasons and long commands wrapped back to
    column 0; on a terminal they now wrap under their own text (rich Console forced to a
    terminal 60 wide: no pty needed to see rich's wrapping)."""
    import io

    from rich.console import Console

    from lab.term import console as term_console
    from lab.term.progress import Progress

    buf = io.StringIO()
    monkeypatch.setattr(term_console, "_console",
                        Console(file=buf, force_terminal=True, width=60, color_system=None,
                                highlight=False, emoji=False))
    show = Progress()
    why = ("needs an NVIDIA GPU (0 GPU(s) on the local backend, 1 needed: no NVIDIA driver "
           "here, so nothing can use a GPU)")
    show({"event": "step-finished", "result": type("R", (), {"error": None,
                                                              "skip_reason": why})()})
    show({"event": "action", "verb": "command", "args": ["python", "grid_search.py",
                                                          "--workers", "4", "--out",
                                                          "result-sequential.json"]})
    lines = [line for line in buf.getvalue().splitlines() if line.strip()]
    assert len(lines) > 2 and lines[0].lstrip().split()[1:3] == ["-", "skipped:"], lines
    assert all(line.startswith(" ") for line in lines[1:]), lines  # never back at column 0
    assert " ".join(" ".join(lines).split()).count("result-sequential.json") == 1


def test_a_code_block_in_a_step_has_one_blank_line_around_it() -> None:
    """A newcomer saw two blank lines above and below every command in a step's panel
    (Markdown's spacing plus the code's own vertical padding): one each now."""
    import io

    from rich.console import Console

    from lab.term.steps import step_markdown

    buf = io.StringIO()
    Console(file=buf, force_terminal=True, width=80, color_system=None).print(
        step_markdown("Run it:\n\n```bash\nkflab pipeline run pipeline.py\n```\n\nThen look."))
    lines = [line.strip() for line in buf.getvalue().splitlines()]
    at = lines.index("kflab pipeline run pipeline.py")
    assert lines[at - 2:at + 3] == ["Run it:", "", lines[at], "", "Then look."], lines
