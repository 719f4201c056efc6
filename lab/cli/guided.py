"""The guided loop of a scenario in progress: check, hint, solve, skip."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from lab.cli.root import Obj, cli, pass_obj

if TYPE_CHECKING:
    from lab.scenarios.guided import Session


@cli.command()
@click.option("--wait", default=5.0, show_default=True,
              help="Seconds to wait for resources that are still settling.")
@pass_obj
def check(obj: Obj, wait: float) -> None:
    """Verify the current step of the scenario in progress."""
    from lab.kube.manifests import last_warnings
    from lab.scenarios import guided
    from lab.term.checks import CheckWait, apply_warnings, check_lines
    from lab.term.console import console, esc, text_width

    session = _session(obj)
    step = session.step
    missing = guided.unmet(session)
    if missing is not None:
        console().print(f"[yellow]Step '{esc(step.title)}' cannot run here: {esc(missing)}.[/]"
                        " `kflab skip` moves past it (recorded as skipped).", width=text_width())
        sys.exit(1)
    with CheckWait() as waiting:
        ok, results = guided.check(session, wait, on_wait=waiting)
    check_lines(results)
    if not ok:
        apply_warnings(last_warnings(obj.state, guided.where_now(obj.state)))
        if any(getattr(r, "failed", None) for r in results):
            console().print(f"[red]Step '{esc(step.title)}': something you ran failed "
                            "(above).[/] Fix it and run it again; `kflab hint` helps.",
                            width=text_width())
        else:
            console().print(f"[red]Step '{esc(step.title)}' is not done yet.[/] "
                            "Try `kflab hint` for help.", width=text_width())
        sys.exit(1)
    console().print(f"[green]Step '{esc(step.title)}' passed.[/]", width=text_width())
    _next(session)


def _session(obj: Obj) -> Session:
    """The lab of this folder, else the one started last -- then named, so a learner in
    another folder sees which lab answers."""
    from pathlib import Path

    from lab.scenarios import guided
    from lab.term.console import echo_wrapped

    session = guided.active(obj.state)
    folder = session.workdir.resolve()
    if not Path.cwd().resolve().is_relative_to(folder):
        home = Path.home().resolve()
        shown = f"~/{folder.relative_to(home)}" if folder.is_relative_to(home) else folder
        echo_wrapped(f"(lab {session.scenario.id}, the one started last; its files are in "
                     f"{shown})")
    return session


def _next(session: object) -> None:
    """After a step is passed or skipped: the finish summary, or the next step (announcing
    when it cannot run here)."""
    from lab.scenarios import guided
    from lab.term.console import console, esc, text_width
    from lab.term.steps import show_step
    from lab.term.summaries import finish_summary

    assert isinstance(session, guided.Session)
    if session.finished:
        statuses = [guided.step_status(session, i) for i in range(len(session.scenario.steps))]
        finish_summary(session, statuses, guided.still_running(session))
        return
    show_step(session)
    missing = guided.unmet(session)
    if missing is not None:
        console().print(f"[yellow]This step cannot run here: {esc(missing)}.[/] "
                        "`kflab skip` moves past it.", width=text_width())


@cli.command()
@pass_obj
def hint(obj: Obj) -> None:
    """Show the next hint for the current step."""
    from lab.scenarios import guided
    from lab.term.console import echo_wrapped

    session = _session(obj)
    n, total, text = guided.hint(session)
    if text is None:
        echo_wrapped("No more hints for this step. `kflab solve` shows the reference solution.")
    else:
        lead = f"Hint {n}/{total}: "
        echo_wrapped(f"{lead}{text}", indent=" " * len(lead))


@cli.command()
@pass_obj
def solve(obj: Obj) -> None:
    """Run the reference solution of the current step, then check it."""
    from lab.scenarios import guided

    session = _session(obj)
    for line in guided.solve(session):
        click.echo(f"  {line}")
    click.get_current_context().invoke(check)


@cli.command()
@pass_obj
def skip(obj: Obj) -> None:
    """Move past a step this machine cannot run (e.g. it needs a GPU); recorded as skipped."""
    from lab.scenarios import guided
    from lab.term.console import console, esc, text_width

    session = _session(obj)
    title = session.step.title
    why = guided.skip(session)
    console().print(f"[yellow]Skipped '{esc(title)}'[/]: {esc(why)}", width=text_width())
    _next(session)
