"""Grade files: one folder per student and scenario, and the class's merged CSV and HTML.

`kflab scenario grade` writes `grades/<student>/<scenario>/`:
    grade.json   everything: per step status, checks, attempts, hints, `kflab solve`, times
    grade.xml    JUnit (one testsuite; per-step properties say what the session recorded)
    grade.csv    one header and one row (the columns of the class CSV)
    report.html  the student's report with the Katib plots of their own runs
    plots/       those plots as PNG files
`kflab grade collect` reads many grade.json files and writes one CSV and one HTML page.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from lab import limits
from lab.errors import InputError, LabError
from lab.kube.conditions import now
from lab.scenarios.htmlpage import duration, esc, page, table, td
from lab.scenarios.htmlreport import render_grade, result_problem
from lab.scenarios.plots import plot_file
from lab.yamlio import read_json

GRADE_FILE = "grade.json"
COLUMNS = ["student", "scenario", "status", "steps_passed", "steps_total", "steps_skipped",
           "attempts", "hints", "solved_by_solve", "time_spent_s", "time_spent", "started_at",
           "last_activity", "graded_at", "signals", "mode"]
MAX_GRADE_BYTES = limits.MAX_GRADE_BYTES


def step_cell(step: dict[str, Any]) -> str:
    """A step's CSV value: passed | passed (cleaned up) | failed | changed | skipped, '+solve'
    when `kflab solve` was used on it."""
    label = step.get("label") or step.get("status")
    return f"{label}{'+solve' if step.get('solved_by_solve') else ''}"


def all_signals(grade: dict[str, Any]) -> list[str]:
    """A grade's integrity signals, with those found across the class by `collect`."""
    return [str(x) for x in (grade.get("signals") or []) + (grade.get("_class_signals") or [])]


def row(grade: dict[str, Any]) -> dict[str, str]:
    s = grade.get("summary") or {}
    out = {"student": grade.get("student"), "scenario": grade.get("scenario"),
           "status": s.get("status"), "steps_passed": s.get("steps_passed"),
           "steps_total": s.get("steps_total"), "steps_skipped": s.get("steps_skipped"),
           "attempts": s.get("attempts"), "hints": s.get("hints"),
           "solved_by_solve": " ".join(map(str, s.get("solved_by_solve") or [])),
           "time_spent_s": s.get("time_spent_s"), "time_spent": duration(s.get("time_spent_s")),
           "started_at": grade.get("started_at"), "last_activity": grade.get("last_activity"),
           "graded_at": grade.get("graded_at"), "signals": "; ".join(all_signals(grade)),
           "mode": grade.get("mode") or "records"}
    for step in grade.get("steps") or []:
        out[f"step:{step.get('id')}"] = step_cell(step)
    return {k: "" if v is None else str(v) for k, v in out.items()}


def _safe(value: str) -> str:
    """A cell a spreadsheet will not run as a formula (a student picks their own name)."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def csv_text(rows: list[dict[str, str]]) -> str:
    columns = list(COLUMNS)
    for r in rows:
        columns += [k for k in r if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, restval="", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: _safe(v) for k, v in r.items()})
    return buf.getvalue()


def junit(result: Any, grade: dict[str, Any]) -> ET.Element:
    """JUnit for one grade: a testcase per step (failure when its checks fail now, skipped
    when its preconditions do not hold here), with what the session recorded as properties."""
    from lab.scenarios import report

    root = report.to_junit([result])
    suite = root.find("testsuite")
    assert suite is not None
    suite.set("name", f"{grade['student']}: {grade['scenario']}")
    props = ET.Element("properties")
    for key in ("student", "scenario", "started_at", "last_activity"):
        ET.SubElement(props, "property", name=key, value=str(grade.get(key) or ""))
    for key, value in (grade.get("summary") or {}).items():
        text = " ".join(value) if isinstance(value, list) else str(value)
        ET.SubElement(props, "property", name=key, value=text)
    for sig in all_signals(grade):  # integrity signals: signals, not proof
        ET.SubElement(props, "property", name="signal", value=sig)
    suite.insert(0, props)
    by_id = {s["id"]: s for s in grade["steps"]}
    for case in suite.findall("testcase"):
        g = by_id.get(case.get("name", ""), {})
        case.set("classname", f"{grade['scenario']}.grade")
        cprops = ET.Element("properties")
        for key in ("status", "attempts", "hints", "solved_by_solve", "passed_in_session",
                    "how"):
            ET.SubElement(cprops, "property", name=key, value=str(g.get(key)))
        case.insert(0, cprops)
        failure = case.find("failure")
        if g.get("how") and g.get("status") == "passed" and failure is not None:
            # verified in the session, cleaned up or replaced since: a pass, said why
            case.remove(failure)
            out = case.find("system-out")
            if out is None:
                out = ET.SubElement(case, "system-out")
            out.text = (f"passed in the student's session at {g.get('passed_in_session')}; "
                        f"{g.get('how')} since: {failure.get('message', '')}\n"
                        + (out.text or ""))
            suite.set("failures", str(max(0, int(suite.get("failures", "1")) - 1)))
        if g.get("status") == "changed":
            failure = case.find("failure")
            if failure is not None:
                failure.set("message", "passed in the student's session at "
                            f"{g.get('passed_in_session')}, fails on the state handed in: "
                            + failure.get("message", ""))
    return root


def write(grade_obj: Any, out: Path) -> dict[str, Path]:
    """Write a grade's files into `out`; returns them by kind."""
    out.mkdir(parents=True, exist_ok=True)
    data = grade_obj.to_dict()
    files = {"json": out / GRADE_FILE, "junit": out / "grade.xml", "csv": out / "grade.csv",
             "html": out / "report.html"}
    files["json"].write_text(json.dumps(data, indent=2) + "\n")
    tree = ET.ElementTree(junit(grade_obj.result, data))
    ET.indent(tree)
    tree.write(files["junit"], encoding="utf-8", xml_declaration=True)
    files["csv"].write_text(csv_text([row(data)]))
    if grade_obj.plots:
        (out / "plots").mkdir(exist_ok=True)
        for p in grade_obj.plots:
            (out / "plots" / plot_file(p)).write_bytes(p["png"])
    files["html"].write_text(render_grade(data, grade_obj.plots))
    return files


# --- the class -------------------------------------------------------------------------------

def find_grades(paths: list[Path]) -> list[Path]:
    """grade.json files named directly, or found in the folders named (any depth: `grades/`
    holds `<student>/<scenario>/grade.json`)."""
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            hits = sorted(p.rglob(GRADE_FILE))
            if not hits:
                raise LabError(f"no {GRADE_FILE} under {p}",
                               hint="grade hand-ins first: `kflab scenario grade NAME --work "
                                    "DIR` writes grades/<student>/<scenario>/grade.json")
            found += hits
        else:
            raise LabError(f"{p} does not exist", hint="name grade folders or grade.json files")
    return found


def load(path: Path) -> dict[str, Any]:
    try:
        # the one bounded reader: size (a FIFO or a device refused), depth and huge
        # integers are errors, not crashes or hangs
        data = read_json(path, limit=MAX_GRADE_BYTES, limit_name="MAX_GRADE_BYTES")
    except InputError as exc:
        raise InputError(str(path), None, f"not a readable grade ({exc.problem[:200]})",
                         hint="grade the hand-in again with `kflab scenario grade`") from None
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: not a readable grade ({str(exc)[:200]})",
                       hint="grade the hand-in again with `kflab scenario grade`") from None
    if not isinstance(data, dict) or data.get("kind") != "kflab-grade":
        raise LabError(f"{path}: field 'kind': not a grade written by `kflab scenario grade`",
                       hint="name grade.json files or the folders holding them")
    problem = None
    if not isinstance(data.get("summary"), dict):
        problem = "summary: expected a mapping"
    elif not isinstance(data.get("steps"), list) or \
            not all(isinstance(s, dict) for s in data["steps"]):
        problem = "steps: expected a list of mappings"
    elif (inner := result_problem(data.get("result"))) is not None:
        problem = f"result.{inner}"
    if problem:
        raise LabError(f"{path}: field '{problem.split(':')[0]}': {problem.split(': ', 1)[1]}",
                       hint="grade the hand-in again with `kflab scenario grade`")
    return data


def collect(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """The grades under `paths`, one per (scenario, student): the newest when a hand-in was
    graded twice. Returns the grades, sorted, and notes on what was replaced."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    notes = []
    for path in find_grades(paths):
        data = load(path)
        data["_file"] = str(path)
        key = (str(data.get("scenario")), str(data.get("student")))
        old = latest.get(key)
        if old is not None:
            keep, drop = (data, old) if str(data.get("graded_at")) >= \
                str(old.get("graded_at")) else (old, data)
            notes.append(f"{key[1]} / {key[0]} graded twice: kept {keep['_file']} "
                         f"({keep.get('graded_at')}), not {drop['_file']}")
            data = keep
        latest[key] = data
    grades = [latest[k] for k in sorted(latest)]
    from lab.scenarios.integrity import shared

    for i, found in shared(grades).items():
        grades[i]["_class_signals"] = found
    return grades, notes


def class_page(grades: list[dict[str, Any]], notes: list[str]) -> str:
    """One page for the class: per scenario a table of students and steps, then each
    student's failing checks with their messages."""
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for g in grades:
        by_scenario.setdefault(str(g.get("scenario")), []).append(g)
    parts = [f"<h1>kflab grades</h1>\n<p class=\"meta\">{len(grades)} grade(s), "
             f"{len(by_scenario)} scenario(s), collected {esc(now())}. A step is "
             "<span class=\"passed\">passed</span> when its checks pass on the work handed in, "
             "<span class=\"changed\">changed</span> when it passed in the student's session "
             "but its checks fail on the work handed in; <span class=\"tag\">solve</span> marks "
             "a step where the student ran <code>kflab solve</code>.</p>"]
    for sid, items in by_scenario.items():
        step_ids = []
        for g in items:
            step_ids += [s.get("id") for s in g["steps"] if s.get("id") not in step_ids]
        headers = ["student", "result", "steps", *map(str, step_ids), "attempts", "hints",
                   "time"]
        rows = []
        for g in items:
            s = g["summary"]
            steps = {st.get("id"): st for st in g["steps"]}
            cells = [td(g.get("student")), td(s.get("status"), str(s.get("status"))),
                     td(f"{s.get('steps_passed')}/{s.get('steps_total')}", "num")]
            for step_id in step_ids:
                st = steps.get(step_id)
                if st is None:
                    cells.append(td(""))
                    continue
                tag = " <span class=\"tag\">solve</span>" if st.get("solved_by_solve") else ""
                cells.append(f"<td class=\"{esc(st.get('status'))}\">"
                             f"{esc(st.get('label') or st.get('status'))}{tag}</td>")
            cells += [td(s.get("attempts"), "num"), td(s.get("hints"), "num"),
                      td(duration(s.get("time_spent_s")), "num")]
            rows.append(cells)
        title = items[0].get("title") or sid
        parts.append(f"<h2>{esc(title)} <span class=\"observed\">({esc(sid)})</span></h2>")
        parts.append(table(headers, rows, "grades"))
        flagged = [(g, all_signals(g)) for g in items if all_signals(g)]
        if flagged:
            parts.append("<h3>Integrity signals</h3><p class=\"meta\">Signals, not proof: "
                         "each says what the hand-in shows; look before you decide.</p><ul>"
                         + "".join(f"<li><b>{esc(g.get('student'))}</b>: {esc(x)}</li>"
                                   for g, found in flagged for x in found) + "</ul>")
        for g in items:
            failing = [(st, c) for st in (g.get("result") or {}).get("steps") or []
                       for c in st.get("checks") or [] if not c.get("ok")]
            if not failing:
                continue
            items_html = "".join(
                f"<li><b>{esc(st.get('id'))}</b>: {esc(c.get('label'))} — "
                f"{esc(c.get('message'))}<br><span class=\"observed\">{esc(c.get('observed'))}"
                "</span></li>" for st, c in failing)
            parts.append(f"<details><summary>{esc(g.get('student'))}: {len(failing)} failing "
                         f"check(s)</summary><ul>{items_html}</ul></details>")
    if notes:
        parts.append("<h3>Notes</h3><ul class=\"notes\">"
                     + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return page("kflab grades", "\n".join(parts))
