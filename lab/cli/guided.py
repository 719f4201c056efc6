"""The guided loop of a scenario in progress: check, hint, solve."""

from __future__ import annotations

import sys

import click

from lab.cli.root import Obj, cli, pass_obj


@cli.command()
@click.option("--wait", default=5.0, show_default=True,
              help="Seconds to wait for resources that are still settling.")
@pass_obj
def check(obj: Obj, wait: float) -> None:
    """Verify the current step of the scenario in progress."""
    from lab.kube.manifests import last_warnings
    from lab.scenarios import guided
    from lab.ui import apply_warnings, check_lines, console, esc, show_step

    session = guided.active(obj.state)
    step = session.step
    ok, results = guided.check(session, wait)
    check_lines(results)
    if not ok:
        apply_warnings(last_warnings(obj.state))
        console().print(f"[red]Step '{esc(step.title)}' is not done yet.[/] "
                        "Try `kflab hint` for help.")
        sys.exit(1)
    console().print(f"[green]Step '{esc(step.title)}' passed.[/]")
    if session.finished:
        console().print(f"[bold green]Scenario '{esc(session.scenario.id)}' complete. "
                        "Well done![/]")
    else:
        show_step(session)


@cli.command()
@pass_obj
def hint(obj: Obj) -> None:
    """Show the next hint for the current step."""
    from lab.scenarios import guided

    session = guided.active(obj.state)
    n, total, text = guided.hint(session)
    if text is None:
        click.echo("No more hints for this step. `kflab solve` shows the reference solution.")
    else:
        click.echo(f"Hint {n}/{total}: {text}")


@cli.command()
@pass_obj
def solve(obj: Obj) -> None:
    """Run the reference solution of the current step, then check it."""
    from lab.scenarios import guided

    session = guided.active(obj.state)
    for line in guided.solve(session):
        click.echo(f"  {line}")
    click.get_current_context().invoke(check)

