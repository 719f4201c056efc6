"""Grading and reports: `kflab progress export`, `kflab scenario grade`, `kflab grade collect`,
`kflab report`."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.root import Obj, cli, pass_obj
from lab.cli.scenario import scenario


@cli.group()
def progress() -> None:
    """Your guided progress: export it to hand in."""


@progress.command("export")
@click.argument("names", nargs=-1)
@click.option("--student", envvar="KFLAB_STUDENT", required=True,
              help="Your name or student number, as your instructor asked (env KFLAB_STUDENT).")
@click.option("--out", "out", required=True, type=click.Path(),
              help="A new folder, or an archive NAME.tar.gz, to hand in.")
@pass_obj
def progress_export(obj: Obj, names: tuple[str, ...], student: str, out: str) -> None:
    """Write your progress, work files and run records into one folder or archive.

    NAMES are scenario ids; without them every scenario you started is exported.
    """
    from lab.scenarios import export
    from lab.scenarios.loader import find

    sids = [find(n).id for n in names]
    manifest = export.export(obj.state, sids, student, Path(out))
    for sid, info in manifest["scenarios"].items():
        click.echo(f"  {sid}: work folder {info['workdir']}")
    for item in manifest["left_out"]:
        click.echo(f"  left out: {item}")
    click.echo(f"wrote {out} ({manifest['files']} files, {manifest['bytes']} bytes) for "
               f"{manifest['student']}; hand it in as your instructor asked")


@scenario.command("grade")
@click.argument("name")
@click.option("--work", "work", required=True, type=click.Path(exists=True),
              help="The student's hand-in: what `kflab progress export` wrote (folder or "
                   "archive), or their work folder with --student-state.")
@click.option("--student", help="Name to grade under (default: the one in the hand-in, or the "
                                "work folder's name).")
@click.option("--student-state", type=click.Path(exists=True, file_okay=False),
              help="The student's state folder, for a work folder that is not an export "
                   "(default: WORK/.kflab).")
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Where the grade files go (default ./grades/STUDENT/NAME).")
@click.option("--wait", default=0.0, show_default=True,
              help="Seconds a check may wait for something still settling (the student's "
                   "work is finished: 0 looks once).")
@click.option("--rerun", is_flag=True,
              help="Trust no record: run the student's handed-in files again in a fresh "
                   "state folder (their manifests, pipelines, scripts: code, run as you) and "
                   "check what they make now (docs/grading.md).")
@pass_obj
def scenario_grade(obj: Obj, name: str, work: str, student: str | None,
                   student_state: str | None, out: str | None, wait: float,
                   rerun: bool) -> None:
    """Grade a student's hand-in: run only the scenario's checks against their state and
    files (never a solution); write grade.json, grade.xml, grade.csv and report.html.
    With --rerun, the checks read what the student's files make when run again."""
    from lab.scenarios import gradebook, grading, handin, htmlreport
    from lab.scenarios.loader import find
    from lab.term.console import console, esc

    s = find(name)
    result = grading.grade(s, Path(work), obj.state, student=student,
                           student_state=Path(student_state) if student_state else None,
                           wait=wait, rerun=rerun)
    htmlreport.save_last(result.to_dict(), kind="grade")
    target = Path(out) if out else Path("grades") / handin.slug(result.student) / s.id
    files = gradebook.write(result, target)
    marks = {"passed": "[green]✔[/]", "failed": "[red]✘[/]", "changed": "[yellow]~[/]",
             "skipped": "[yellow]-[/]"}
    out_ = console()
    out_.print(f"[bold]{esc(result.student)}[/] — {esc(s.id)}"
               + (" (rerun: the student's files run again)" if rerun else ""))
    for step in result.steps:
        extra = f"{step.attempts} attempt(s), {step.hints} hint(s)"
        if step.solved_by_solve:
            extra += ", [yellow]kflab solve used[/]"
        out_.print(f"  {marks.get(step.status, '?')} {esc(step.id)}: {esc(step.label)} "
                   f"({extra})")
    for note in result.notes:
        out_.print(f"  [dim]note: {esc(note)}[/]", soft_wrap=True)
    if result.signals:
        out_.print("  [yellow]integrity signals[/] (signals, not proof; look before you "
                   "decide):", soft_wrap=True)
        for sig in result.signals:
            out_.print(f"    [yellow]![/] {esc(sig)}", soft_wrap=True)
    summary = result.summary()
    out_.print(f"{esc(summary['status'])}: {summary['steps_passed']}/{summary['steps_total']} "
               f"steps verified; grade files in {esc(files['json'].parent)}", soft_wrap=True)


@cli.group()
def grade() -> None:
    """Grades of a class."""


@grade.command("collect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--csv", "csv_out", default="grades.csv", show_default=True,
              type=click.Path(dir_okay=False), help="The class CSV, one row per grade.")
@click.option("--html", "html_out", default="grades.html", show_default=True,
              type=click.Path(dir_okay=False), help="The class page (one self-contained file).")
@click.option("--rerun", is_flag=True,
              help="First grade again with --rerun every hand-in whose grade was made from "
                   "its records (the hand-in must still be where it was graded from).")
@pass_obj
def grade_collect(obj: Obj, paths: tuple[str, ...], csv_out: str, html_out: str,
                  rerun: bool) -> None:
    """Merge many students' grades (grade folders or grade.json files) into one CSV and one
    HTML page."""
    from lab.scenarios import gradebook, grading

    if rerun:
        for line in grading.rerun_all([Path(p) for p in paths], obj.state):
            click.echo(line)
    grades, notes = gradebook.collect([Path(p) for p in paths])
    Path(csv_out).write_text(gradebook.csv_text([gradebook.row(g) for g in grades]))
    Path(html_out).write_text(gradebook.class_page(grades, notes))
    for note in notes:
        click.echo(f"note: {note}")
    flagged = [(g, gradebook.all_signals(g)) for g in grades if gradebook.all_signals(g)]
    if flagged:
        click.echo("integrity signals (signals, not proof; look before you decide):")
        for g, found in flagged:
            for sig in found:
                click.echo(f"  {g.get('student')} / {g.get('scenario')}: {sig}")
    click.echo(f"{len(grades)} grade(s): wrote {csv_out} and {html_out}"
               + (f"; {len(flagged)} with integrity signals" if flagged else ""))


@cli.command()
@click.argument("source")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False),
              help="The HTML file (default ./kflab-report-NAME.html).")
@pass_obj
def report(obj: Obj, source: str, out: str | None) -> None:
    """Write an HTML report: steps, checks and the experiment plots, in one file.

    SOURCE is a scenario id (its last `kflab scenario run`/`test`/`grade`), a JSON file
    written by `--json`, or a grade folder.
    """
    from lab.scenarios import htmlreport
    from lab.scenarios.handin import slug

    path = Path(source)
    if path.exists():
        text = htmlreport.render_file(path)
        stem = path.stem if path.is_file() else path.name
    else:
        from lab.scenarios.loader import find

        sid = find(source).id
        saved, sandbox = htmlreport.last(obj.state, sid)
        text = htmlreport.render_saved(saved, sandbox)
        stem = sid
    target = Path(out or f"kflab-report-{slug(stem)}.html")
    target.write_text(text)
    click.echo(f"wrote {target}")
