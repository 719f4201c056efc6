"""HTML report of a scenario run or a grade: steps, every check with pass/fail, the failing
checks' messages, and the Katib plots the run drew, in one self-contained file.

Sources: a result just returned (`kflab scenario run --html FILE`), the last unattended run
or grade of a scenario (`kflab report NAME`: each run saves `report.json` in its sandbox, kept
until the next run of that scenario), or a JSON file written by `--json` or by a grade.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from lab import limits, state
from lab.errors import InputError, LabError
from lab.kube.conditions import now
from lab.scenarios.htmlpage import duration, esc, page, png, table, td
from lab.scenarios.plots import MAX_PLOT_BYTES, experiment_plots, plot_file
from lab.yamlio import read_bytes, read_json

SAVED = "report.json"


def result_problem(data: Any) -> str | None:
    """Where a result read back from a file lacks the shape a report needs (the field), or
    None. Files may have been edited: a report is refused, never half drawn."""
    if not isinstance(data, dict):
        return "(top): expected a mapping"
    steps = data.get("steps")
    if not isinstance(steps, list):
        return "steps: expected a list"
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            return f"steps[{i}]: expected a mapping"
        checks = step.get("checks")
        if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
            return f"steps[{i}].checks: expected a list of mappings"
    return None


# --- rendering -------------------------------------------------------------------------------

def _check_items(checks: list[dict[str, Any]]) -> str:
    items = []
    for c in checks:
        ok = bool(c.get("ok"))
        text = f"<span class=\"{'check-ok' if ok else 'check-fail'}\">{esc(c.get('label'))}</span>"
        if not ok and c.get("message"):
            text += f"<br>{esc(c.get('message'))}"
        if c.get("observed"):
            text += f"<br><span class=\"observed\">{esc(c.get('observed'))}</span>"
        items.append(f"<li>{text}</li>")
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _plots_html(plots: list[dict[str, Any]]) -> str:
    if not plots:
        return ""
    figs = "\n".join(png(p["png"], f"{p['name']} of experiment {p['experiment']}",
                         f"experiment {p['experiment']}: {p['name']}") for p in plots)
    return f"<h3>Experiment plots</h3>\n{figs}"


def steps_table(result: dict[str, Any], grades: dict[str, dict[str, Any]] | None = None) -> str:
    """One row per step: status, its checks (messages for failing ones only), and for a
    grade what the student's session recorded."""
    headers = ["#", "step", "status", "checks"]
    if grades is not None:
        headers += ["attempts", "hints", "kflab solve"]
    rows = []
    for i, step in enumerate(result.get("steps") or [], 1):
        g = (grades or {}).get(step.get("id"), {})
        status = g.get("status") or step.get("status", "")
        detail = _check_items(step.get("checks") or [])
        if step.get("error"):
            detail += f"<p class=\"failed\">{esc(step['error'])}</p>"
        if step.get("skip_reason"):
            detail += f"<p>skipped: {esc(step['skip_reason'])}</p>"
        if status == "changed":
            detail += (f"<p>passed in the student's session at {esc(g.get('passed_in_session'))}"
                       "; its checks fail on the state handed in</p>")
        if g.get("how"):
            detail += (f"<p>verified in the student's session at "
                       f"{esc(g.get('passed_in_session'))}; {esc(g.get('how'))} since</p>")
        row = [td(i, "num"), f"<td><b>{esc(step.get('title'))}</b><br>"
               f"<span class=\"observed\">{esc(step.get('id'))}</span></td>",
               td(g.get("label") or status, status), f"<td>{detail}</td>"]
        if grades is not None:
            row += [td(g.get("attempts", ""), "num"), td(g.get("hints", ""), "num"),
                    td("used" if g.get("solved_by_solve") else "", "changed"
                       if g.get("solved_by_solve") else "")]
        rows.append(row)
    return table(headers, rows, "steps")


def run_section(result: dict[str, Any], plots: list[dict[str, Any]],
                notes: list[str] | None = None) -> str:
    passed = sum(s.get("status") == "passed" for s in result.get("steps") or [])
    head = (f"<h2>{esc(result.get('title'))} <span class=\"observed\">({esc(result.get('id'))})"
            "</span></h2>\n"
            f"<p class=\"meta\">{esc(result.get('mode'))} mode on the "
            f"{esc(result.get('backend'))} backend, started {esc(result.get('started_at'))}, "
            f"{esc(round(float(result.get('seconds') or 0), 1))} s: "
            f"<span class=\"{esc(result.get('status'))}\">{esc(result.get('status'))}</span>, "
            f"{passed}/{len(result.get('steps') or [])} steps passed</p>")
    body = head + steps_table(result) + _plots_html(plots)
    if notes:
        body += "<ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"
    return body


def render_runs(entries: list[tuple[dict[str, Any], list[dict[str, Any]], list[str]]]) -> str:
    """A report of unattended runs: (result data, plots, notes) per scenario."""
    title = "kflab report: " + ", ".join(str(r.get("id")) for r, _, _ in entries)
    body = (f"<h1>{esc(title)}</h1>\n<p class=\"meta\">written {esc(now())} by kflab</p>\n"
            + "\n".join(run_section(*e) for e in entries))
    return page(title, body)


def render_results(results: list[Any]) -> str:
    """A report of results just returned by the runner (their sandboxes still exist)."""
    from lab.scenarios.report import result_dict

    return render_runs([(result_dict(r), experiment_plots(Path(r.workdir).parent / "state")
                         if r.workdir else [], []) for r in results])


def render_grade(grade: dict[str, Any], plots: list[dict[str, Any]]) -> str:
    """A grade of one student for one scenario."""
    s = grade.get("summary") or {}
    title = f"{grade.get('student')}: {grade.get('scenario')}"
    facts = [("student", grade.get("student")), ("scenario", grade.get("title")),
             ("result", f"{s.get('status')}: {s.get('steps_passed')}/{s.get('steps_total')} "
                        "steps verified"),
             ("kflab solve used on", ", ".join(s.get("solved_by_solve") or []) or "no step"),
             ("attempts / hints", f"{s.get('attempts')} / {s.get('hints')}"),
             ("time spent", f"{duration(s.get('time_spent_s'))} (from {grade.get('started_at')} "
                            f"to {grade.get('last_activity')})"),
             ("hand-in", grade.get("handin")), ("graded", grade.get("graded_at"))]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    grades = {g.get("id"): g for g in grade.get("steps") or []}
    body = (f"<h1>{esc(title)}</h1>\n<table class=\"facts\">{rows}</table>\n"
            + steps_table(grade.get("result") or {}, grades) + _plots_html(plots))
    signals = grade.get("signals") or []
    if signals:
        body += ("<h3>Integrity signals</h3><p class=\"meta\">Signals, not proof: each says "
                 "what the hand-in shows; look before you decide.</p><ul class=\"notes\">"
                 + "".join(f"<li>{esc(x)}</li>" for x in signals) + "</ul>")
    notes = grade.get("notes") or []
    if notes:
        body += "<h3>Notes</h3><ul class=\"notes\">" + \
            "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"
    return page(f"kflab grade: {title}", body)


# --- the last run of a scenario, and reports from files --------------------------------------

def save_last(result_data: dict[str, Any], kind: str = "run") -> None:
    """Keep a run's or grade's data in its sandbox for `kflab report NAME`."""
    workdir = result_data.get("workdir") or (result_data.get("result") or {}).get("workdir")
    if not workdir:
        return
    run = Path(workdir).parent
    if run.parent.parent.name != "sandboxes":  # only runner.sandbox's folders keep reports
        return
    # The run's sandbox is unlocked once the run returns, so the next run of the scenario may
    # be pruning it right now: write under the lock that pruning holds (runner.sandbox), and
    # only while the folder is still there (a pruned run has no report to keep).
    with state.held(run.parent.with_name(f"{run.parent.name}.lock")):
        if run.is_dir():
            state.write_json(run / SAVED, {"kind": kind, "data": result_data})


def last(state_root: Path, sid: str) -> tuple[dict[str, Any], Path]:
    """The newest saved run or grade of scenario `sid`, and its sandbox folder."""
    base = state.path(state_root, "sandboxes", sid)
    runs = sorted((p for p in base.iterdir() if (p / SAVED).is_file()),
                  key=lambda p: p.name) if base.is_dir() else []
    if not runs:
        raise LabError(f"no finished run or grade of '{sid}' in {state_root}",
                       hint=f"run it with `kflab scenario run {sid}` (or grade a hand-in), "
                            "then ask for the report; the last one is kept until the next")
    saved = state.read_json(state.confine(state_root, runs[-1] / SAVED))
    return saved or {}, runs[-1]


def render_saved(saved: dict[str, Any], sandbox: Path | None) -> str:
    data = saved.get("data") or {}
    plots = experiment_plots(sandbox / "state") if sandbox else []
    if saved.get("kind") == "grade":
        return render_grade(data, plots)
    return render_runs([(data, plots, [])])


def render_file(path: Path) -> str:
    """HTML for a JSON file written by `kflab scenario run --json` or by `kflab scenario grade`
    (a grade folder holds grade.json and its plots/)."""
    if path.is_dir():
        path = path / "grade.json"
    try:
        data = read_json(path, limit=limits.MAX_GRADE_BYTES, limit_name="MAX_GRADE_BYTES",
                         hint="give a file written by `--json` or a grade folder")
    except InputError as exc:
        raise LabError(f"{path}: not readable JSON ({exc.problem[:200]})",
                       hint="give a file written by `--json` or a grade folder") from None
    if isinstance(data, dict) and data.get("kind") == "kflab-grade":
        plots = []
        for p in data.get("plots") or []:
            f = path.parent / "plots" / plot_file(p)
            if f.is_file() and f.resolve().is_relative_to(path.parent.resolve()):
                with contextlib.suppress(InputError):
                    plots.append({**p, "png": read_bytes(f, limit=MAX_PLOT_BYTES)})
        return render_grade(data, plots)
    if isinstance(data, list) and data and all(isinstance(r, dict) and "steps" in r
                                               for r in data):
        for i, r in enumerate(data):
            if (problem := result_problem(r)) is not None:
                raise LabError(f"{path}: field '[{i}].{problem.split(':')[0]}': "
                               f"{problem.split(': ', 1)[1]}",
                               hint="give the JSON file `kflab scenario run --json` wrote")
        # Plots come from the run's sandbox while it is there (until the next run).
        return render_runs([(r, experiment_plots(
            Path(str(r.get("workdir") or "/nonexistent")).parent / "state"), []) for r in data])
    raise LabError(f"{path}: not a kflab result (expected the JSON of `kflab scenario run "
                   "--json` or a grade.json)", hint="give a file kflab wrote")
