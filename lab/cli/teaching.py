"""`kflab class ...`: a class of students on one shared cluster, and the server it needs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from lab.cli.root import Obj, cli, pass_obj
from lab.errors import LabError

_class_opt = click.option("--class", "class_name", default="class", show_default=True,
                          help="The class's name (prefixes every student's namespace).")
_kube_opts = [
    click.option("--kubeconfig", type=click.Path(dir_okay=False),
                 help="The instructor's kubeconfig (default: the lab's, else $KUBECONFIG)."),
    click.option("--context", help="Its context (default: the current one)."),
]


def _kube(f: object) -> object:
    for opt in reversed(_kube_opts):
        f = opt(f)
    return f


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """click's FloatRange lets nan through (every comparison with nan is false)."""
    if value is not None and value != value:
        raise click.BadParameter("not a number", ctx=ctx, param=param)
    return value


@cli.group("class")
def class_group() -> None:
    """A class on one shared server: namespaces, quotas and kubeconfigs per student."""


@class_group.command("create")
@click.argument("roster", type=click.Path(dir_okay=False))
@_class_opt
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Folder for the students' kubeconfig files (default ./kubeconfigs-CLASS).")
@click.option("--server", help="The API server URL students reach (default: the one in your "
                               "kubeconfig; a lab on 127.0.0.1 needs the server's address).")
@click.option("--hours", default=24 * 7, show_default=True, type=float,
              help="How long the students' tokens stay valid.")
@click.option("--pod-security", type=click.Choice(["baseline", "privileged"]),
              default="baseline", show_default=True,
              help="Pod Security level enforced in students' namespaces (privileged only "
                   "for an offline wheelhouse mounted from the node: docs/teaching.md).")
@click.option("--no-kfp", "no_kfp", is_flag=True,
              help="Do not let students reach Kubeflow Pipelines (its API is shared).")
@_kube
@pass_obj
def class_create(obj: Obj, roster: str, class_name: str, out: str | None, server: str | None,
                 hours: float, pod_security: str, no_kfp: bool, kubeconfig: str | None,
                 context: str | None) -> None:
    """Create a namespace, quota, ServiceAccount and kubeconfig for each student of ROSTER
    (a CSV with a `student` column; `name` and `email` optional)."""
    from lab.scenarios.loader import load_all
    from lab.teaching import class_, sizing
    from lab.teaching import roster as rosters

    students = rosters.load(Path(roster), class_name)
    quota = sizing.class_quota([sizing.lab_need(s) for s in load_all()])
    kube, _, _ = class_.instructor_cluster(obj.state, kubeconfig, context)
    record = class_.create(kube, obj.state, students, class_name,
                           Path(out or f"kubeconfigs-{class_name}"), quota=quota,
                           server=server, hours=hours, kfp=not no_kfp,
                           pod_security=pod_security)
    if students.ignored_columns:
        click.echo(f"note: columns not used: {', '.join(students.ignored_columns)}")
    for seat in record.seats:
        click.echo(f"  {seat.id:<24} {seat.namespace:<32} {seat.kubeconfig}")
    click.echo(f"quota per student: {', '.join(f'{k}={v}' for k, v in record.quota.items())}")
    click.echo("students can reach Kubeflow Pipelines (shared: see docs/teaching.md)"
               if record.kfp else "Kubeflow Pipelines: not reachable by students")
    click.echo(f"class {class_name!r}: {len(record.seats)} student(s) on {record.server}; "
               f"tokens expire {record.seats[0].expires or 'never'}; hand each student "
               "their kubeconfig file only")


@class_group.command("status")
@_class_opt
@click.option("--lab", "labs", multiple=True, help="Only these labs (default: every lab).")
@click.option("--student", "students", multiple=True, help="Only these student ids.")
@click.option("--json", "as_json", is_flag=True)
@_kube
@pass_obj
def class_status(obj: Obj, class_name: str, labs: tuple[str, ...], students: tuple[str, ...],
                 as_json: bool, kubeconfig: str | None, context: str | None) -> None:
    """Students x labs: each lab's checks, run read-only in each student's namespace
    (steps passed / steps checkable on the cluster; '-' when none is)."""
    from lab.scenarios.loader import find, load_all
    from lab.teaching import class_, progress

    record = class_.load_record(obj.state, class_name)
    scenarios = [find(n) for n in labs] if labs else \
        [s for s in load_all() if s.why_not("cluster") is None]
    _, path, ctx = class_.instructor_cluster(obj.state, kubeconfig, context)
    cells = progress.survey(record, scenarios, obj.state, kubeconfig=path, context=ctx,
                            students=students)
    if as_json:
        click.echo(json.dumps([{"student": c.seat.id, "lab": c.scenario.id,
                                "passed": c.passed, "checkable": c.checkable,
                                "steps": {s.id: s.status for s in c.result.steps},
                                "checks": {s.id: [{"check": ch.label, "ok": ch.ok,
                                                   "observed": ch.observed}
                                                  for ch in s.checks]
                                           for s in c.result.steps}}
                               for c in cells], indent=2))
        return
    width = max([len(s.id) for s in scenarios] + [5])
    click.echo(f"{'STUDENT':<24} " + " ".join(f"{s.id[:width]:>{width}}" for s in scenarios))
    by_student: dict[str, list[progress.Cell]] = {}
    for c in cells:
        by_student.setdefault(c.seat.id, []).append(c)
    for sid, row in by_student.items():
        click.echo(f"{sid:<24} " + " ".join(f"{c.text():>{width}}" for c in row))


@class_group.command("grade")
@_class_opt
@click.option("--lab", "labs", multiple=True, help="Only these labs (default: every lab).")
@click.option("--out", "out", default="grades", show_default=True,
              type=click.Path(file_okay=False),
              help="Where grades/STUDENT/LAB/ and grades.csv / grades.html go.")
@click.option("--rerun", "rerun", type=click.Path(exists=True, file_okay=False),
              help="A folder of hand-ins named by student id (ID.tar.gz or ID/): each lab "
                   "is graded by running that student's files again, as `kflab scenario "
                   "grade --rerun` does (their code, run as you).")
@_kube
@pass_obj
def class_grade(obj: Obj, class_name: str, labs: tuple[str, ...], out: str,
                rerun: str | None, kubeconfig: str | None, context: str | None) -> None:
    """Grade every student's namespace (read-only) into the files `kflab scenario grade`
    writes, and the class CSV/HTML of `kflab grade collect`; with --rerun, from each
    student's hand-in run again instead."""
    from lab.scenarios.loader import find, load_all
    from lab.teaching import class_, progress

    record = class_.load_record(obj.state, class_name)
    scenarios = [find(n) for n in labs] if labs else \
        [s for s in load_all() if s.why_not("cluster") is None]
    _, path, ctx = class_.instructor_cluster(obj.state, kubeconfig, context)
    cells = progress.survey(record, scenarios, obj.state, kubeconfig=path, context=ctx)
    csv_path, html_path, n = progress.write_grades(
        cells, record.server, Path(out), rerun=Path(rerun) if rerun else None, state=obj.state)
    click.echo(f"{n} grade(s): wrote {csv_path} and {html_path}")


@class_group.command("delete")
@_class_opt
@click.option("--yes", is_flag=True, help="Do not ask.")
@_kube
@pass_obj
def class_delete(obj: Obj, class_name: str, yes: bool, kubeconfig: str | None,
                 context: str | None) -> None:
    """Delete the class: every student's namespace (and all in it), the KFP access, the
    students' kubeconfig files and the record."""
    from lab.teaching import class_

    if not yes:
        try:
            sure = click.confirm(f"delete class {class_name!r} and everything its students "
                                 "made?", default=False)
        except click.exceptions.Abort:
            if sys.stdin.isatty():  # Ctrl-C or Ctrl-D at the question
                raise
            # no terminal and nothing piped in: click would say only "aborted"
            raise LabError(f"class delete asks before deleting class {class_name!r}, and "
                           "there is no answer on its input", hint=f"run `kflab class delete "
                           f"--class {class_name} --yes` to delete without asking") from None
        if not sure:
            raise click.exceptions.Abort()
    kube, _, _ = class_.instructor_cluster(obj.state, kubeconfig, context)
    for item in class_.delete_class(kube, obj.state, class_name):
        click.echo(f"  deleted {item}")
    click.echo(f"class {class_name!r} deleted")


@class_group.command("plan")
@click.option("--students", required=True, type=click.IntRange(1, 1000),
              help="How many students share the server.")
@click.option("--upstream", envvar="KFLAB_UPSTREAM",
              type=click.Path(exists=True, file_okay=False),
              help="An extracted kubeflow/manifests release tree to render the components "
                   "from (env KFLAB_UPSTREAM; default: the footprint kflab ships, rendered "
                   "from the pinned release).")
@click.option("--cpus", type=click.FloatRange(0.5, 1e6), callback=_finite,
              help="The server's CPUs (default: this machine's).")
@click.option("--memory", type=click.FloatRange(0.5, 1e9), callback=_finite,
              help="Its memory in GiB (default: this machine's).")
@click.option("--disk", type=click.FloatRange(1, 1e12), callback=_finite,
              help="Its free disk in GiB (default: this machine's, under the state folder).")
@pass_obj
def class_plan(obj: Obj, students: int, upstream: str | None, cpus: float | None,
               memory: float | None, disk: float | None) -> None:
    """CPU, memory and disk for N students on one server, and the labs that fit."""
    from lab.components.footprint import lab_footprint
    from lab.components.release import footprint_rows
    from lab.scenarios.loader import load_all
    from lab.teaching import plan

    server = plan.this_server(obj.state, cpus, memory, disk)
    rows_fp = lab_footprint(Path(upstream)) if upstream else footprint_rows()
    total = rows_fp[-1][1]
    base, rows = plan.plan(students, load_all(), total, server)
    g = plan.GIB
    click.echo(f"server: {server.cpus:g} CPUs, {server.memory / g:.1f} GiB memory, "
               f"{server.disk / g:.0f} GiB disk; {students} student(s)")
    click.echo(f"{'LAB':<30} {'CPU':>7} {'MEMORY':>11} {'DISK':>9}  FITS")
    for r in [base, *rows]:
        fits = ("" if r is base else "yes" if r.fits else
                f"no: local backend only ({r.why_not})" if r.why_not else
                f"no: {', '.join(r.short)} short")
        gpus = f" (and {r.gpus} GPUs: one per student)" if r.gpus else ""
        click.echo(f"{r.lab:<30} {r.cpu:>7.2f} {r.memory / g:>7.1f} GiB {r.disk / g:>5.0f} GiB"
                   f"  {fits}{gpus}")
    fit = [r.lab for r in rows if r.fits]
    click.echo(f"{len(fit)} of {len(rows)} labs fit {students} student(s) at once"
               + (f": {', '.join(fit)}" if fit else ""))
