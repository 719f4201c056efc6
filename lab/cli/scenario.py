"""`kflab scenario ...` and `kflab demo`: list, show, validate, run, test and start labs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.root import Obj, backend_options, cli, pass_obj


@cli.group()
def scenario() -> None:
    """List, read, run and test scenarios."""


@scenario.command("list")
@click.option("--json", "as_json", is_flag=True)
def scenario_list(as_json: bool) -> None:
    """List the available scenarios."""
    from lab.scenarios.loader import load_all
    from lab.scenarios.model import BACKENDS

    items = load_all()
    if as_json:
        click.echo(json.dumps([{"id": s.id, "title": s.title, "level": s.level,
                                "duration": s.duration, "requires": list(s.requires),
                                "steps": len(s.steps), "backends": list(s.backends),
                                "unsupported": {b: s.why_not(b) for b in BACKENDS
                                                if s.why_not(b)}}
                               for s in items], indent=2))
        return
    from lab.ui import scenario_table

    scenario_table(items)


@scenario.command("show")
@click.argument("name")
def scenario_show(name: str) -> None:
    """Show a scenario's description and steps."""
    from lab.scenarios.loader import find
    from lab.ui import scenario_overview

    scenario_overview(find(name))


@scenario.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False), required=True)
def scenario_validate(paths: tuple[str, ...]) -> None:
    """Validate scenario folders (for authors); errors name file, line and field."""
    from lab.scenarios.loader import load_scenario

    for p in paths:
        s = load_scenario(Path(p))
        click.echo(f"ok  {s.id}: {len(s.steps)} steps")


def _run_many(obj: Obj, names: tuple[str, ...], all_: bool, mode: str, json_out: str | None,
              junit_out: str | None, html_out: str | None = None) -> None:
    from lab.scenarios import report
    from lab.scenarios.loader import find, load_all
    from lab.scenarios.runner import run_scenario
    from lab.ui import Progress, console, esc, summary

    if all_:
        scenarios = load_all()  # one that cannot run on the backend is reported skipped
    elif names:
        scenarios = [find(n) for n in names]
    else:
        raise click.UsageError("name one or more scenarios, or give --all")
    choice = obj.choice()
    results = []
    for s in scenarios:
        console().rule(f"[bold]{esc(s.id)}[/] ({mode}, {choice.name} backend)")
        res = run_scenario(s, obj.state, mode=mode, sink=Progress(), backend=choice)
        if res.status == "skipped" and res.steps and res.steps[0].skip_reason:
            console().print(f"[yellow]skipped: {esc(res.steps[0].skip_reason)}[/]")
        results.append(res)
    summary(results)
    from lab.scenarios import htmlreport

    for res in results:  # for `kflab report NAME`, until the next run of the scenario
        htmlreport.save_last(report.result_dict(res))
    if html_out:
        Path(html_out).write_text(htmlreport.render_results(results))
    if json_out:
        report.write_json(results, Path(json_out))
    if junit_out:
        report.write_junit(results, Path(junit_out))
    if not all(r.ok for r in results):
        sys.exit(1)


def _report_options(f: Any) -> Any:
    f = click.option("--html", "html_out", type=click.Path(dir_okay=False),
                     help="Write a self-contained HTML report (steps, checks, plots).")(f)
    f = click.option("--junit", "junit_out", type=click.Path(dir_okay=False),
                     help="Write results as JUnit XML.")(f)
    f = click.option("--json", "json_out", type=click.Path(dir_okay=False),
                     help="Write results as JSON.")(f)
    f = click.option("--all", "all_", is_flag=True, help="Every scenario the backend runs.")(f)
    return click.argument("names", nargs=-1)(f)


def _mode_command(mode: str, doc: str) -> None:
    @scenario.command(mode if mode == "test" else "run", help=doc)
    @_report_options
    @backend_options
    @pass_obj
    def command(obj: Obj, names: tuple[str, ...], all_: bool, json_out: str | None,
                junit_out: str | None, html_out: str | None) -> None:
        _run_many(obj, names, all_, mode, json_out, junit_out, html_out)


_mode_command("auto", "Run scenarios unattended (auto mode): each step's solution, then "
                      "its checks.")
_mode_command("test", "Test scenarios: each step's checks must FAIL before its solution and PASS "
                      "after.")



@scenario.command("start")
@click.argument("name")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Where your files go (default ./NAME).")
@click.option("--restart", is_flag=True, help="Forget saved progress and begin again.")
@backend_options
@pass_obj
def scenario_start(obj: Obj, name: str, workdir: str | None, restart: bool) -> None:
    """Start (or resume) a scenario in guided mode (check/hint/solve then use the same
    backend)."""
    from lab.scenarios import guided
    from lab.scenarios.loader import find

    s = find(name)
    session = guided.start(s, obj.state, Path(workdir or s.id), restart=restart,
                           backend=obj.choice(),
                           explicit=bool(obj.backend_opt or obj.context_opt))
    if session.finished:
        click.echo(f"'{s.id}' is already complete; use --restart to do it again.")
        return
    from lab.ui import show_step

    show_step(session)


@cli.command()
@click.option("--json", "json_out", type=click.Path(dir_okay=False))
@click.option("--junit", "junit_out", type=click.Path(dir_okay=False))
@backend_options
@pass_obj
def demo(obj: Obj, json_out: str | None, junit_out: str | None) -> None:
    """Run every scenario unattended on the chosen backend (default local), with a summary."""
    _run_many(obj, (), True, "auto", json_out, junit_out)
