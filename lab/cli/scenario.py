"""`kflab scenario ...` and `kflab demo`: list, show, validate, run, test and start labs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.complete import scenario_ids
from lab.cli.root import Obj, backend_options, cli, pass_obj


@cli.group()
def scenario() -> None:
    """List, read, run and test scenarios."""


@scenario.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_obj
def scenario_list(obj: Obj, as_json: bool) -> None:
    """List the available scenarios."""
    from lab.scenarios.availability import cannot_run_here, runs_partly
    from lab.scenarios.loader import load_all
    from lab.scenarios.model import BACKENDS

    items = load_all()
    progress = _progress_column(obj, items)
    here = {s.id: why for s in items if (why := cannot_run_here(s)) is not None}
    partly = {s.id for s in items if s.id in here and runs_partly(s)}
    if as_json:
        click.echo(json.dumps([{"id": s.id, "title": s.title, "level": s.level,
                                "duration": s.duration, "requires": list(s.requires),
                                "steps": len(s.steps), "backends": list(s.backends),
                                "unsupported": {b: s.why_not(b) for b in BACKENDS
                                                if s.why_not(b)},
                                "cannot_run_here": here.get(s.id),
                                "runs_partly_here": s.id in partly,
                                "progress": progress.get(s.id)}
                               for s in items], indent=2))
        return
    from lab.term.summaries import scenario_table

    scenario_table(items, progress, here, partly)


def _progress_column(obj: Obj, items: list[Any]) -> dict[str, str]:
    """id -> "2/3" (in progress), "done" or "2/3 *" for the active one."""
    from lab.scenarios import guided

    active = guided.active_id(obj.state)
    out = {}
    for s in items:
        saved = guided.progress_of(obj.state, s.id)
        if saved is None:
            continue
        current = min(int(saved.get("current", 0)), len(s.steps))
        text = "done" if current >= len(s.steps) else f"{current}/{len(s.steps)}"
        out[s.id] = text + (" (active)" if s.id == active else "")
    return out


@scenario.command("show")
@click.argument("name", shell_complete=scenario_ids)
@click.option("--step", "step_no", type=int, help="Show step N (1-based) in full.")
@pass_obj
def scenario_show(obj: Obj, name: str, step_no: int | None) -> None:
    """Show a scenario's description and steps, or one step's text (--step N)."""
    from lab.scenarios import guided
    from lab.scenarios.loader import find
    from lab.term.steps import scenario_overview, show_step

    s = find(name)
    if step_no is None:
        scenario_overview(s, _progress_column(obj, [s]).get(s.id))
        return
    if not 1 <= step_no <= len(s.steps):
        raise click.BadParameter(f"{s.id} has steps 1 to {len(s.steps)}", param_hint="--step")
    saved = guided.progress_of(obj.state, s.id)
    session = guided.Session(s, saved or {"workdir": s.id, "current": -1, "steps": {}},
                             obj.state)
    show_step(session, step_no - 1)


@scenario.command("status")
@click.argument("name", required=False, shell_complete=scenario_ids)
@pass_obj
def scenario_status(obj: Obj, name: str | None) -> None:
    """Where am I: the scenario in progress (or NAME), its steps and what is next."""
    from lab.errors import LabError
    from lab.scenarios import guided
    from lab.scenarios.loader import find
    from lab.term.summaries import scenario_status as show

    if name is None:
        session = guided.active(obj.state)
    else:
        s = find(name)
        saved = guided.progress_of(obj.state, s.id)
        if saved is None:
            raise LabError(f"'{s.id}' has not been started",
                           hint=f"start it with `kflab scenario start {s.id}`")
        session = guided.Session(s, saved, obj.state)
    steps = session.scenario.steps
    show(session, [guided.step_status(session, i) for i in range(len(steps))],
         [session.progress["steps"].get(st.id) or {} for st in steps])
    if session.finished:
        return
    from lab.term.console import echo_wrapped

    echo_wrapped(f"Now: step {session.index + 1}, {session.step.title!r}: "
                 f"`kflab scenario show {session.scenario.id} --step {session.index + 1}` "
                 "shows it again; then kflab check / hint / solve.")


@scenario.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False), required=True)
def scenario_validate(paths: tuple[str, ...]) -> None:
    """Validate scenario folders (for authors); errors name file, line and field."""
    from lab.scenarios.loader import load_scenario

    for p in paths:
        s = load_scenario(Path(p))
        click.echo(f"ok  {s.id}: {len(s.steps)} step{'' if len(s.steps) == 1 else 's'}")


def _run_many(obj: Obj, names: tuple[str, ...], all_: bool, mode: str, json_out: str | None,
              junit_out: str | None, html_out: str | None = None) -> None:
    from lab.scenarios import report
    from lab.scenarios.loader import find, load_all
    from lab.scenarios.runner import run_scenario
    from lab.term.console import console, esc
    from lab.term.progress import Progress
    from lab.term.summaries import summary

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
        sink = Progress()
        res = run_scenario(s, obj.state, mode=mode, sink=sink, backend=choice)
        if res.status == "skipped" and res.steps and res.steps[0].skip_reason and \
                res.steps[0].skip_reason not in sink.said_skips:
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
    return click.argument("names", nargs=-1, shell_complete=scenario_ids)(f)


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
@click.argument("name", shell_complete=scenario_ids)
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Where your files go (default: where it was started before, else ./NAME).")
@click.option("--restart", is_flag=True,
              help="Begin again from the starting files: your old files are moved aside to "
                   "FOLDER.before-restart, saved progress is forgotten.")
@backend_options
@pass_obj
def scenario_start(obj: Obj, name: str, workdir: str | None, restart: bool) -> None:
    """Start (or resume) a scenario in guided mode (check/hint/solve then use the same
    backend)."""
    from lab.scenarios import guided
    from lab.scenarios.loader import find
    from lab.term.console import console, esc, text_width
    from lab.term.steps import show_step

    s = find(name)
    session = guided.start(s, obj.state, Path(workdir) if workdir else None, restart=restart,
                           backend=obj.choice(),
                           explicit=bool(obj.backend_opt or obj.context_opt))
    for note in session.notes:
        console().print(f"[dim]{esc(note)}[/]", width=text_width())
    if session.finished:
        click.echo(f"'{s.id}' is already complete; use --restart to do it again.")
        return
    # Steps this machine cannot run are announced now, not discovered at the end.
    for i, why in guided.unmet_steps(session):
        console().print(f"[yellow]Note: step {i + 1} ({esc(s.steps[i].title)}) cannot run "
                        f"here: {esc(why)}.[/] When you reach it, `kflab skip` moves past it "
                        "(recorded as skipped).", width=text_width())
    show_step(session)


@cli.command()
@click.option("--json", "json_out", type=click.Path(dir_okay=False))
@click.option("--junit", "junit_out", type=click.Path(dir_okay=False))
@backend_options
@pass_obj
def demo(obj: Obj, json_out: str | None, junit_out: str | None) -> None:
    """Run every scenario unattended on the chosen backend (default local), with a summary."""
    _run_many(obj, (), True, "auto", json_out, junit_out)
