"""Where the learner stands: the scenarios (with progress and what this machine cannot
run), a scenario's status, what a finished scenario did, and a summary of unattended runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lab.term.console import cell, console, esc, hanging, text_width
from lab.term.tables import Column, print_table

if TYPE_CHECKING:
    from lab.scenarios.runner import ScenarioResult


MARK = {"passed": "[green]✔ passed[/]", "failed": "[red]✘ failed[/]",
        "error": "[red]✘ error[/]", "skipped": "[yellow]- skipped[/]"}


def passed_count(res: ScenarioResult) -> int:
    return sum(s.status == "passed" for s in res.steps)


def summary(results: list[ScenarioResult]) -> None:
    from rich.table import Table

    table = Table(title="kflab scenarios", header_style="bold")
    for col in ("scenario", "mode", "steps", "result", "time"):
        table.add_column(col)
    for res in results:
        passed = sum(s.status == "passed" for s in res.steps)
        table.add_row(cell(res.id), res.mode, f"{passed}/{len(res.steps)}",
                      MARK.get(res.status, esc(res.status)), f"{res.seconds:.1f}s")
    console().print(table)
    for res in results:  # which steps were skipped, and each step's own reason
        reasons: dict[str, list[str]] = {}
        for step in res.steps:
            if step.status == "skipped" and step.skip_reason:
                reasons.setdefault(step.skip_reason, []).append(step.id)
        for why, steps in reasons.items():
            if len(steps) == len(res.steps):
                hanging("", f"[yellow]{esc(res.id)}[/]: skipped, {esc(why)}")
            else:
                hanging("", f"[yellow]{esc(res.id)}[/]: step {esc(', '.join(steps))} "
                        f"skipped, {esc(why)}; {passed_count(res)} of {len(res.steps)} passed")


def scenario_table(items: list[Any], progress: dict[str, str] | None = None,
                   here: dict[str, str] | None = None, partly: set[str] | None = None) -> None:
    """The scenarios; `progress` (id -> "2/3", "done") adds where the learner is; `here`
    (id -> why) marks the labs this machine cannot run whole (no GPU, a missing extra),
    `partly` those of them whose other steps do run here."""
    from lab.scenarios.model import BACKENDS

    columns = [Column("ID", key=True), Column("TITLE"), Column("LEVEL"), Column("TIME"),
               Column("STEPS"), Column("NEEDS"), Column("BACKENDS")]
    if progress is not None:
        columns.append(Column("PROGRESS"))
    rows, notes = [], []
    for s in items:
        runs = ", ".join(s.backends)
        for b in BACKENDS:
            if (why := s.why_not(b)) is not None:
                runs += f" (not {b}*)"
                notes.append(f"* {s.id} on {b}: {why}")
        if here and s.id in here and partly and s.id in partly:
            runs += " (partly here*)"
            notes.append(f"* {s.id} on this machine: {here[s.id]}")
        elif here and s.id in here:
            runs += " (not here*)"
            notes.append(f"* {s.id} cannot run on this machine: {here[s.id]}")
        row = [s.id, s.title, s.level, s.duration, str(len(s.steps)), ", ".join(s.requires),
               runs]
        if progress is not None:
            row.append(progress.get(s.id, "-"))
        rows.append(row)
    print_table(columns, rows)
    for note in notes:  # why a scenario cannot run on a backend
        console().print(f"[dim]{esc(note)}[/]")


STEP_MARK = {"passed": "[green]✔ passed[/]", "solved": "[green]✔ solved[/] [dim](kflab solve)[/]",
             "skipped": "[yellow]- skipped[/]", "current": "[bold cyan]▶ current[/]",
             "todo": "[dim]· to do[/]"}


def scenario_status(session: Any, statuses: list[str], records: list[dict[str, Any]]) -> None:
    """`kflab scenario status`: the scenario, its steps and where the learner is."""
    from rich.table import Table

    s = session.scenario
    out = console()
    done = sum(st in ("passed", "solved", "skipped") for st in statuses)
    out.print(f"[bold]{esc(s.id)}[/] — {esc(s.title)}: {done}/{len(s.steps)} steps done"
              + (" [green](complete)[/]" if session.finished else ""), width=text_width())
    out.print(f"  work folder: {esc(session.workdir)}", soft_wrap=True)
    out.print(f"  backend: {esc(session.backend_choice.name)}    started: "
              f"{esc(session.progress.get('started_at', '?'))}", width=text_width())
    rows = [[str(i), step.title, st, str(rec.get("attempts", 0) or ""),
             f"{rec.get('hints', 0)}/{len(step.hints)}" if step.hints else ""]
            for i, (step, st, rec) in enumerate(zip(s.steps, statuses, records, strict=True), 1)]
    headers = ("#", "STEP", "STATUS", "CHECKED", "HINTS")  # CHECKED: `kflab check` runs
    if not out.is_terminal:  # piped: one line per step, as `get` prints, for grep and scripts
        plain = {"solved": "solved (kflab solve)", "todo": "to do"}
        print_table([Column(h, key=h in ("#", "STATUS")) for h in headers],
                    [[*r[:2], plain.get(r[2], r[2]), *r[3:]] for r in rows])
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in headers:
        table.add_column(col, no_wrap=col in ("#", "STATUS"))
    for row in rows:
        table.add_row(row[0], cell(row[1]), STEP_MARK.get(row[2], esc(row[2])), *row[3:])
    out.print(table, width=text_width())


def finish_summary(session: Any, statuses: list[str], running: list[tuple[str, str]]) -> None:
    """What a learner sees when a scenario is complete: steps, attempts, hints, and what is
    still running with the command that stops it."""
    s = session.scenario
    out = console()
    counts = {k: statuses.count(k) for k in ("passed", "solved", "skipped")}
    records = [session.progress["steps"].get(step.id) or {} for step in s.steps]
    attempts = sum(r.get("attempts", 0) for r in records)
    hints = sum(r.get("hints", 0) for r in records)
    parts = [f"{counts['passed']} passed"]
    if counts["solved"]:
        parts.append(f"{counts['solved']} with kflab solve")
    if counts["skipped"]:
        parts.append(f"{counts['skipped']} skipped")
    out.print(f"[bold green]Scenario '{esc(s.id)}' complete.[/] Steps: {', '.join(parts)}; "
              f"{attempts} check(s), {hints} hint(s).", width=text_width())
    for step, st in zip(s.steps, statuses, strict=True):
        if st == "skipped":
            why = (session.progress["steps"].get(step.id) or {}).get("skipped", "")
            out.print(f"  [yellow]skipped:[/] {esc(step.title)} — {esc(why)}",
                      width=text_width())
    if running:
        out.print("Still running (it uses memory and a port until you stop it):",
                  width=text_width())
        for what, stop in running:
            out.print(f"  {esc(what)}: stop it with [bold]{esc(stop)}[/]", soft_wrap=True)
    else:
        out.print("Nothing is left running.", width=text_width())
    out.print("Next: [bold]kflab scenario list[/] shows the other labs; "
              f"[bold]kflab scenario start {esc(s.id)} --restart[/] does this one again.",
              width=text_width())
