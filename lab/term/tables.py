"""Tables as kubectl prints them: key columns (the names a user types) never cut, the rest
wrapped between words on a terminal, plain aligned columns when piped; the resource lists of
`kflab get`, the doctor's rows and the verify role's checks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lab.term.console import TEXT_WIDTH, cell, console, esc, printable, wrap


def age(stamp: str | None) -> str:
    if not stamp:
        return ""
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return ""
    secs = int((datetime.now(UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


_LONG_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])")


def short_numbers(text: object) -> str:
    """Numbers in a table cell rounded to 4 significant digits (0.123456789 -> 0.1235), so a
    table fits 80 columns; `-o yaml` / `-o json` keep the full values."""
    def fmt(m: re.Match[str]) -> str:
        try:
            return f"{float(m.group()):.4g}"
        except ValueError:
            return m.group()

    return _LONG_NUMBER.sub(fmt, str(text))


@dataclass(frozen=True)
class Column:
    header: str
    key: bool = False  # a name the user types: never wrapped, never cut


def print_table(columns: list[Column], rows: list[list[str]]) -> None:
    """A table whose key columns (names) are never truncated. On a terminal the other
    columns wrap between words to make room; where even that cannot fit, each row becomes a
    short block (its names first, then `HEADER: value` wrapped between words). Piped: plain
    aligned columns as kubectl prints them, nothing wrapped or cut."""
    from rich.table import Table

    rows = [[printable(c if col.key else short_numbers(c)) for col, c in
             zip(columns, row, strict=True)] for row in rows]
    widths = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    out = console()
    if not out.is_terminal:
        for row in [[c.header for c in columns], *rows]:
            line = "   ".join(text.ljust(w) for text, w in zip(row, widths, strict=True))
            out.print(cell(line.rstrip()), soft_wrap=True)
        return
    words = [max([len(w) for r in rows for w in r[i].split()] + [len(c.header)])
             for i, c in enumerate(columns)]
    need = sum(w if c.key else min(w, ww) for c, w, ww in zip(columns, widths, words,
                                                               strict=True))
    if need + 2 * (len(columns) - 1) > out.width:
        _records(columns, rows, out.width)
        return
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))
    for c, w in zip(columns, widths, strict=True):
        if c.key:
            table.add_column(c.header, no_wrap=True, min_width=w)
        else:
            table.add_column(c.header, overflow="fold")
    for row in rows:
        table.add_row(*map(cell, row))
    out.print(table)


def _records(columns: list[Column], rows: list[list[str]], width: int) -> None:
    """Rows as blocks, for a terminal too narrow for the table: names never cut."""
    out = console()
    for row in rows:
        keys = [v for c, v in zip(columns, row, strict=True) if c.key and v]
        rest = [f"{c.header}:\u00a0{v}" for c, v in zip(columns, row, strict=True)
                if not c.key and v]
        out.print(cell("  ".join(keys)), style="bold", soft_wrap=True)
        out.print(cell(wrap("    " + "   ".join(rest), min(width, TEXT_WIDTH), "")),
                  soft_wrap=True)


def resource_rows(kind: Any, objects: list[dict[str, Any]], namespaces: bool = False,
                  wide: bool = False) -> tuple[list[Column], list[list[str]]]:
    """The columns and cells of `kflab get KIND` (kubectl's layout; `wide` adds the
    failure reason)."""
    import jmespath.exceptions

    from lab.kube.kinds import column_value

    columns = ([Column("NAMESPACE", key=True)] if namespaces else []) + [Column("NAME", True)]
    from lab.kube.kinds import GPUS_ANNOTATION

    gpus = any(GPUS_ANNOTATION in (o.get("metadata", {}).get("annotations") or {})
               for o in objects)
    columns += [Column(header) for header, _ in kind.columns]
    columns += [Column("GPUS")] if gpus else []
    columns += [Column("AGE")]
    if wide:
        columns.append(Column("REASON"))
    rows = []
    for obj in objects:
        meta = obj.get("metadata", {})
        cells = [meta.get("namespace", "")] if namespaces else []
        cells.append(meta.get("name", ""))
        for _, query in kind.columns:
            try:
                value = column_value(query, obj)
            except jmespath.exceptions.JMESPathError:  # e.g. length() of a missing list
                value = None
            cells.append("" if value is None else str(value))
        if gpus:
            cells.append(str((meta.get("annotations") or {}).get(GPUS_ANNOTATION, "")))
        cells.append(age(meta.get("creationTimestamp")))
        if wide:
            from lab.backends.failures import reason

            cells.append(reason(obj) or "")
        rows.append([str(c) for c in cells])
    return columns, rows


def resource_table(kind: Any, objects: list[dict[str, Any]], namespaces: bool = False,
                   wide: bool = False) -> None:
    if not objects:
        console().print(f"No {kind.plural} found.")
        return
    print_table(*resource_rows(kind, objects, namespaces, wide))


def doctor_table(rows: list[Any], title: str) -> None:
    """The doctor's rows: a box table on a terminal; piped, plain aligned columns as the
    other commands print (print_table), one line per check, nothing drawn, cut or wrapped."""
    from rich.table import Table

    if not console().is_terminal:
        console().print(f"kflab doctor ({esc(title)})", soft_wrap=True)
        print_table([Column("CHECK", key=True), Column("RESULT"), Column("OBSERVED"),
                     Column("ADVICE")],
                    [[r.name, r.status, r.observed or "", r.advice or ""] for r in rows])
        return
    table = Table(title=f"kflab doctor ({esc(title)})", header_style="bold")
    for col in ("check", "result", "observed", "advice"):
        table.add_column(col)
    colors = {"pass": "green", "warn": "yellow", "fail": "red"}
    for r in rows:
        table.add_row(cell(r.name), f"[{colors.get(r.status, 'white')}]{esc(r.status)}[/]",
                      cell(r.observed), cell(r.advice))
    console().print(table)


def verify_table(result: Any) -> None:
    """The verify role's table: each check, pass/fail, its time, what ran or what failed and
    where to look (lab.provision.verify.Result)."""
    from rich.table import Table

    passed = len(result.rows) - len(result.failed)
    title = (f"verify ({result.when()}): {passed}/{len(result.rows)} passed"
             + ("" if result.ok else f"; failed: {', '.join(r.name for r in result.failed)}"))
    if not console().is_terminal:  # piped: plain columns, one line per check, as doctor's
        console().print(esc(title), soft_wrap=True)
        print_table([Column("CHECK", key=True), Column("RESULT"), Column("TIME"),
                     Column("DETAIL")],
                    [[r.name, "pass" if r.ok else "fail", f"{r.seconds:.0f}s",
                      r.message + (f" (fix: {r.hint})" if r.hint else "")]
                     for r in result.rows])
    else:
        table = Table(title=esc(title), header_style="bold", title_justify="left")
        for col in ("check", "result", "time", "what ran / what failed, and where to look"):
            table.add_column(col, overflow="fold")
        for row in result.rows:
            text = esc(row.message) + (f"\n[dim]→ {esc(row.hint)}[/]" if row.hint else "")
            table.add_row(cell(row.name), "[green]✔ pass[/]" if row.ok else "[red]✘ fail[/]",
                          f"{row.seconds:.0f}s", text)
        console().print(table)
    if not result.ok:
        console().print("[dim]→ `kflab debug bundle` writes one tar.gz with the logs, events "
                        "and pods of the kubeflow and lab namespaces (secrets redacted) to "
                        "attach to a report[/]")
