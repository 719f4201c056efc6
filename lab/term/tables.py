"""Terminal output: tables, progress lines and summaries (rich, imported lazily).

Everything that comes from a user -- names, paths, log lines, trial parameters, messages --
goes through `esc()` (or a rich Text) before it meets rich: `/data/[/raw]` prints as written
and is never read as a style tag, and control characters are shown, not sent to the terminal.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from rich.console import Console

    from lab.scenarios.runner import ScenarioResult

_console: Console | None = None

MARK = {"passed": "[green]✔ passed[/]", "failed": "[red]✘ failed[/]",
        "error": "[red]✘ error[/]", "skipped": "[yellow]- skipped[/]"}


def console() -> Console:
    global _console
    if _console is None:
        import sys

        from rich.console import Console

        # Bind the real stdout now: a pipeline run redirects sys.stdout to its log meanwhile.
        # No emoji codes either: a user's ":warning:" stays text.
        _console = Console(file=sys.stdout, highlight=False, emoji=False)
        # Piped or redirected: lines are never re-wrapped (grep, CI logs, copy and paste).
        _console.soft_wrap = not _console.is_terminal
    return _console


TEXT_WIDTH = 100  # prose (steps, hints, errors) stays readable on a 220-column terminal


def text_width() -> int:
    """How wide prose is printed: the terminal's width, at most TEXT_WIDTH."""
    return min(console().width, TEXT_WIDTH)


def wrap(text: str, width: int | None, indent: str = "  ") -> str:
    """Wrap each line of `text` at `width` on word boundaries only: a word, a path, a flag
    or a URL is never split (a longer one overflows instead). Continuation lines keep the
    line's own indentation plus `indent`. No width (piped output): unchanged."""
    import textwrap

    if not width:
        return text
    out: list[str] = []
    for line in text.splitlines() or [""]:
        lead = line[:len(line) - len(line.lstrip())]
        out.extend(textwrap.wrap(line, width, subsequent_indent=lead + indent,
                                 break_long_words=False, break_on_hyphens=False)
                   or [line])
    return "\n".join(out)


def stream_width(stream: Any) -> int | None:
    """TEXT_WIDTH-capped width of the terminal `stream` writes to; None when it is not a
    terminal (then nothing is wrapped)."""
    import shutil

    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return min(shutil.get_terminal_size().columns, TEXT_WIDTH)


def echo_wrapped(text: str, *, err: bool = False, indent: str = "  ", **style: Any) -> None:
    """click.echo/secho of prose, wrapped on word boundaries to the terminal (capped)."""
    import sys

    import click

    stream = sys.stderr if err else sys.stdout
    click.secho(wrap(text, stream_width(stream), indent), err=err, **style)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(value: object) -> str:
    """Text with control characters (ESC, BEL, CR...) shown as \\xNN instead of obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def esc(value: object) -> str:
    """A user value ready to sit inside rich markup: printed literally."""
    from rich.markup import escape

    return escape(printable(value))


def cell(value: object) -> Any:
    """A user value as a rich Text (table cells): no markup, no emoji, no control codes."""
    from rich.text import Text

    return Text(printable(value))


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


class Progress:
    """Prints engine events as they happen: one line each, readable live and in CI logs."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        console()  # bind the terminal before any run redirects stdout
        self.t0 = time.monotonic()
        self.task_t0: dict[str, float] = {}
        self.trials: TrialTable | None = None
        self.pulls: PullBar | None = None
        # Skip reasons already printed: a lab whose steps all need a GPU says why once.
        self.said_skips: set[str] = set()

    def _elapsed(self) -> str:
        return f"[dim]{time.monotonic() - self.t0:6.1f}s[/]"

    def __call__(self, ev: dict[str, Any]) -> None:
        out = console()
        kind = ev.get("event")
        if kind == "step-started":
            out.print(f"{self._elapsed()} [bold]▶ {esc(ev['step'])}[/]: {esc(ev['title'])}")
        elif kind == "action":
            args = ev["args"]
            what = " ".join(map(str, args)) if isinstance(args, list) else (
                args if isinstance(args, str) else ", ".join(f"{k}={v}" for k, v in args.items()
                                                             if k != "arguments"))
            out.print(f"{self._elapsed()}   [cyan]{esc(ev['verb'])}[/] {esc(what)}")
        elif kind == "run-started":
            out.print(f"{self._elapsed()}     pipeline run [bold]{esc(ev['run'])}[/]: "
                      f"{len(ev['tasks'])} tasks")
        elif kind == "task-started":
            self.task_t0[ev["task"]] = time.monotonic()
        elif kind == "task-finished":
            took = time.monotonic() - self.task_t0.get(ev["task"], time.monotonic())
            color = "green" if ev["state"] == "SUCCEEDED" else "red"
            out.print(f"{self._elapsed()}       task {esc(ev['task'])} "
                      f"[{color}]{esc(ev['state'])}[/] [dim]({took:.1f}s)[/]")
        elif kind == "check":
            res = ev["result"]
            mark = "[green]✔[/]" if res.ok else "[red]✘[/]"
            line = f"{self._elapsed()}   {mark} {esc(res.label)}"
            if not res.ok or self.verbose:
                line += f" [dim]— {esc(res.observed)}[/]"
            out.print(line)
            if not res.ok:
                hanging("           ", f"[yellow]{esc(res.message)}[/]")
        elif kind == "checks-before":  # `scenario test`: before the solution, all must fail
            results = ev["results"]
            held = [r for r in results if r.ok]
            if not held:
                out.print(f"{self._elapsed()}   before the solution: {len(results)} "
                          f"check(s) fail, as they must")
            for r in held:
                out.print(f"{self._elapsed()}   [red]✘ before the solution, "
                          f"{esc(r.label)} already passes[/] [dim]— {esc(r.observed)}[/]")
        elif kind == "step-finished":
            res = ev["result"]
            if res.error:
                hanging("           ", f"[red]{esc(res.error)}[/]")
            why = getattr(res, "skip_reason", None)
            if why and why in self.said_skips:
                out.print(f"{self._elapsed()}   [yellow]- skipped (as above)[/]")
            elif why:
                self.said_skips.add(why)
                out.print(f"{self._elapsed()}   [yellow]- skipped: {esc(why)}[/]")
        elif kind == "log":  # a line of a training replica's output, streamed live
            out.print(f"[dim]{esc(ev['replica'])} |[/] {esc(ev['line'])}", soft_wrap=True)
        elif kind == "message":
            hanging(f"{self._elapsed()}   ", esc(ev["text"]))
        elif kind in ("pull", "pulled"):  # a container image being pulled (containers/)
            self.pulls = self.pulls or PullBar(self._elapsed)
            self.pulls.update(ev)
        elif kind == "experiment-started":
            self.trials = TrialTable(ev, self._elapsed)
        elif kind in ("trial-started", "trial-finished", "experiment-finished") and self.trials:
            self.trials.update(ev)
            if kind == "experiment-finished":
                self.trials = None


class PullBar:
    """An image pull: a bar of layers on a terminal (the engine's own bars need one), the
    start and the end on one line each elsewhere."""

    def __init__(self, elapsed: Any) -> None:
        self.elapsed = elapsed
        self.bars: dict[str, Any] = {}
        self.progress: Any = None
        self.t0: dict[str, float] = {}

    def update(self, ev: dict[str, Any]) -> None:
        out = console()
        image = str(ev.get("image"))
        if image not in self.t0:
            self.t0[image] = time.monotonic()
            if not out.is_terminal:
                out.print(f"{self.elapsed()}   pulling image {esc(image)} "
                          f"[dim]({esc(ev.get('why', ''))})[/]", soft_wrap=True)
        if out.is_terminal and self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(TextColumn("   pulling {task.description}"),
                                     BarColumn(), MofNCompleteColumn(),
                                     TextColumn("layers"), console=out, transient=True)
            self.progress.start()
        if self.progress is not None:
            if image not in self.bars:
                self.bars[image] = self.progress.add_task(esc(image), total=None)
            total = ev.get("total") or ev.get("layers") or None
            done = ev.get("done", total if ev["event"] == "pulled" else 0)
            self.progress.update(self.bars[image], completed=done, total=total)
        if ev["event"] == "pulled":
            took = time.monotonic() - self.t0[image]
            if self.progress is not None:
                self.progress.remove_task(self.bars.pop(image))
                if not self.bars:
                    self.progress.stop()
                    self.progress = None
            out.print(f"{self.elapsed()}   pulled image {esc(image)} [dim]"
                      f"({ev.get('layers', 0)} layers, {took:.1f}s)[/]", soft_wrap=True)


STATE_COLOR = {"Succeeded": "green", "Running": "cyan", "Failed": "red",
               "MetricsUnavailable": "red", "Killed": "yellow", "EarlyStopped": "yellow"}


class TrialTable:
    """Katib trials while an experiment runs: a live table on a terminal, one line per
    finished trial elsewhere (CI logs stay readable)."""

    MAX_ROWS = 15  # the newest trials; a long experiment must not scroll the terminal away

    def __init__(self, ev: dict[str, Any], elapsed: Any) -> None:
        self.ev, self.elapsed = ev, elapsed
        self.rows: dict[str, dict[str, Any]] = {}
        self.live: Any = None
        out = console()
        cap = ev.get("max_trials") or "?"
        hanging(f"{elapsed()}     ", f"experiment [bold]{esc(ev['experiment'])}[/]: "
                  f"{esc(ev['algorithm'])}, up to {esc(cap)} trials, {esc(ev['parallel'])} at a "
                  f"time, objective {esc(ev['metric'])}")
        if out.is_terminal:
            from rich.live import Live

            self.live = Live(self.render(), console=out, refresh_per_second=4)
            self.live.start()

    def render(self) -> Any:
        """The table, fitted to the terminal: the trial name (what `kflab logs trial NAME`
        needs), the state, the value and the time are never split; parameters get a column
        each where they fit, else a line of `name=value` pairs under each trial, wrapped
        between pairs."""
        from rich.console import Group
        from rich.text import Text

        rows = list(self.rows.items())
        hidden = max(0, len(rows) - self.MAX_ROWS)
        shown = rows[hidden:]
        params = list(self.ev["params"])
        values = [[short_numbers(r["params"].get(p, "")) for p in params] for _, r in shown]
        objective = [short_numbers("" if r.get("objective") is None else r["objective"])
                     for _, r in shown]
        times = [f"{r['seconds']:.1f}s" if "seconds" in r else "" for _, r in shown]
        headers = ["TRIAL", "STATE", self.ev["metric"].upper(), "TIME"]
        widths = [max([len(headers[0]), *(len(n) for n, _ in shown)]),
                  max([len(headers[1]), *(len(str(r["state"])) for _, r in shown)]),
                  max([len(headers[2]), *map(len, objective)]),
                  max([len(headers[3]), *map(len, times)])]
        apart = [max([len(p), *(len(v[i]) for v in values)]) for i, p in enumerate(params)]
        width = console().width
        together = sum(widths) + sum(apart) + 2 * (len(widths) + len(apart) - 1) < width
        if together:
            headers += [p.upper() for p in params]
            widths += apart
        lines = [Text("  ".join(h.ljust(w) for h, w in zip(headers, widths,
                                                             strict=False)).rstrip(),
                      style="bold")]
        for (name, row), vals, obj, took in zip(shown, values, objective, times, strict=True):
            state = str(row["state"])
            line = Text(printable(name).ljust(widths[0]) + "  ")
            line.append(printable(state).ljust(widths[1]),
                        style=STATE_COLOR.get(state, "white"))
            rest = [obj, took, *(vals if together else [])]
            line.append("  " + "  ".join(v.ljust(w) for v, w in zip(rest, widths[2:],
                                                                     strict=False)))
            line.rstrip()
            lines.append(line)
            if not together and params:
                pairs = "   ".join(f"{p}={v}" for p, v in zip(params, vals, strict=True))
                lines.append(Text(wrap("    " + printable(pairs), width - 1, ""),
                                  style="dim"))
        if hidden:
            lines.append(Text(f"{hidden} earlier trials not shown (kflab get trials)",
                              style="dim"))
        return Group(*lines)

    def update(self, ev: dict[str, Any]) -> None:
        out = console()
        kind = ev["event"]
        if kind == "trial-started":
            self.rows[ev["trial"]] = {"state": "Running", "params": ev["params"]}
        elif kind == "trial-finished":
            row = self.rows.setdefault(ev["trial"], {"params": {}})
            row.update(state=ev["state"], objective=ev["objective"], seconds=ev["seconds"])
            if self.live is None:
                params = ", ".join(f"{k}={v}" for k, v in row["params"].items())
                color = STATE_COLOR.get(ev["state"], "white")
                extra = f" [dim]({esc(ev['detail'])})[/]" if ev["state"] != "Succeeded" else ""
                out.print(f"{self.elapsed()}       trial {esc(ev['trial'])} [{color}]"
                          f"{esc(ev['state'])}[/] {esc(self.ev['metric'])}="
                          f"{esc(ev['objective'])} [dim]{esc(params)} "
                          f"({ev['seconds']:.1f}s)[/]{extra}")
        if self.live is not None:
            self.live.update(self.render())
        if kind == "experiment-finished":
            if self.live is not None:
                self.live.stop()
            best = ", ".join(f"{a['name']}={a['value']}" for a in ev["assignments"])
            hanging(f"{self.elapsed()}     ", f"experiment {esc(ev['experiment'])} "
                      f"[bold]{esc(ev['condition'])}[/] ({esc(ev['reason'])}); best trial "
                      f"{esc(ev['best'] or '-')}" + (f": {esc(best)}" if best else ""))
            for plot in filter(None, (ev.get("plots") or "").split(",")):
                hanging("           plot: ", esc(plot))


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


def _hang(text: str, style: str = "", mark: tuple[str, str] | None = None) -> None:
    """Print one line of prose wrapped to the terminal, continuation lines indented under
    its own indentation plus two (never back at column 0). `mark` colours the first
    occurrence of a symbol (e.g. ✘ in red). Piped: one line, never cut."""
    out = console()
    width = text_width() if out.is_terminal else None
    body = esc(wrap(text, width, "  "))
    if mark is not None:
        body = body.replace(mark[0], f"[{mark[1]}]{mark[0]}[/]", 1)
    out.print(f"[{style}]{body}[/]" if style else body, soft_wrap=True)


def hanging(prefix: str, body: str) -> None:
    """Print `prefix` then `body` (both rich markup); on a terminal the body wraps under
    itself, never back at column 0 (a word longer than the room left is folded in place).
    Piped: one line, never cut."""
    out = console()
    if not out.is_terminal:
        out.print(prefix + body, soft_wrap=True)
        return
    from rich.table import Table
    from rich.text import Text

    head = Text.from_markup(prefix)
    grid = Table.grid()
    grid.add_column(no_wrap=True, width=head.cell_len)
    grid.add_column(overflow="fold")
    grid.add_row(head, Text.from_markup(body))
    out.print(grid)


def check_lines(results: list[Any]) -> None:
    for res in results:
        if res.ok:
            _hang(f"  ✔ {res.label}", mark=("✔", "green"))
            continue
        failed = getattr(res, "failed", None)
        if failed:  # the resource failed: say so and why, never "not yet"
            lines = str(failed).splitlines()
            _hang(f"  ✘ {res.label}: failed", style="red")
            for line in lines:
                _hang(f"    {line}", style="red" if line == lines[0] else "")
            continue
        _hang(f"  ✘ {res.label}: {res.message}", mark=("✘", "red"))
        _hang(f"    {res.observed}", style="dim")


class CheckWait:
    """A live line while a guided check waits for a resource to settle: what it waits for,
    what it sees, how long so far. On a terminal it is redrawn in place and removed when the
    check ends; elsewhere one line says what is waited for."""

    def __init__(self) -> None:
        self.live: Any = None
        self.told: set[str] = set()

    def __enter__(self) -> CheckWait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __call__(self, label: str, outcome: Any, waited: float, limit: float) -> None:
        out = console()
        if not out.is_terminal:
            if label not in self.told:
                self.told.add(label)
                out.print(f"  waiting up to {limit:.0f}s for: {esc(label)}")
            return
        from rich.text import Text

        line = Text.assemble(("  ⧗ waiting for ", "yellow"), (printable(label), "bold"),
                             f" ({waited:.1f}s of {limit:.0f}s): ",
                             (printable(outcome.observed), "dim"))
        line.truncate(out.width - 1, overflow="ellipsis")  # one line, redrawn in place
        if self.live is None:
            from rich.live import Live

            self.live = Live(line, console=out, transient=True, auto_refresh=False)
            self.live.start()
        self.live.update(line, refresh=True)


def apply_warnings(warnings: list[str]) -> None:
    """What the learner's last `kflab apply` warned about, next to a failing check: a
    misspelled field is often why a step does not pass."""
    if not warnings:
        return
    console().print("  [yellow]Your last `kflab apply` warned:[/]")
    for warning in warnings:
        console().print(f"    [yellow]Warning:[/] {esc(warning)}")


def step_markdown(text: str) -> Any:
    """A step's markdown, its code blocks never re-wrapped into misleading lines: a trailing
    `# comment` that does not fit moves to its own comment line(s), a long shell or Python
    line continues with a backslash (still valid when pasted), anything else with a marked
    continuation; every line then fits."""
    from rich.markdown import CodeBlock, Markdown
    from rich.syntax import Syntax

    class FittedCode(CodeBlock):
        def __rich_console__(self, console: Any, options: Any) -> Any:
            width = max(20, options.max_width - 2)  # Syntax padding
            code = "\n".join(fit_code_line(line, width, self.lexer_name)
                             for line in str(self.text).rstrip().splitlines())
            yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=False, padding=1)

    class StepMarkdown(Markdown):
        elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "fence": FittedCode,
                                              "code_block": FittedCode}

    return StepMarkdown(text)


_SHELLISH = ("bash", "sh", "shell", "console", "zsh", "python", "py", "text", "")


def fit_code_line(line: str, width: int, lexer: str = "bash") -> str:
    """One code line made to fit `width` (see step_markdown)."""
    import textwrap

    if len(line) <= width:
        return line
    lead = line[:len(line) - len(line.lstrip())]
    code, sep, comment = line.partition("  #")
    if sep and code.strip():  # `cmd   # why`: the comment goes above, as its own lines
        notes = textwrap.wrap(comment.strip(), width - len(lead) - 2, break_long_words=False)
        return "\n".join([*(f"{lead}# {n}" for n in notes),
                          fit_code_line(code.rstrip(), width, lexer)])
    if line.lstrip().startswith("#"):
        notes = textwrap.wrap(line.lstrip().lstrip("#").strip(), width - len(lead) - 2,
                              break_long_words=False)
        return "\n".join(f"{lead}# {n}" for n in notes)
    shellish = lexer.lower() in _SHELLISH
    mark, indent = (" \\", lead + "    ") if shellish else ("", lead + "↪ ")
    parts = textwrap.wrap(line.strip(), width - len(indent) - len(mark),
                          break_long_words=False, break_on_hyphens=False)
    return "\n".join((lead if i == 0 else indent) + p + (mark if i < len(parts) - 1 else "")
                     for i, p in enumerate(parts))


def show_step(session: Any, index: int | None = None) -> None:
    """A step of a guided scenario in a panel (the current one unless `index`), then what
    the learner can do next."""
    from rich.panel import Panel

    s = session.scenario
    i = session.index if index is None else index
    step = s.steps[i]
    out = console()
    title = f"{s.id} — step {i + 1}/{len(s.steps)}: {step.title}"
    if not out.is_terminal:
        # Piped or redirected (less, a file): the step's own markdown, whole, never cut
        # at a panel's edge.
        out.print(cell(f"# {title}\n\n{step.text.strip()}\n\n(work folder: "
                       f"{session.workdir})"), soft_wrap=True)
        return
    width = min(out.width, TEXT_WIDTH + 4)
    # the title goes inside when the border cannot hold it whole
    inside = len(title) + 6 > width
    out.print(Panel(step_markdown(step.text if not inside else f"**{title}**\n\n{step.text}"),
                    width=width, title=None if inside else esc(title),
                    subtitle=f"work folder: {esc(session.workdir)}"))
    if index is None or index == session.index:
        out.print("When done: [bold]kflab check[/]   stuck: [bold]kflab hint[/]   "
                  "show me: [bold]kflab solve[/]   where am I: [bold]kflab scenario status[/]",
                  width=text_width())


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
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("#", "STEP", "STATUS", "CHECKS", "HINTS"):
        table.add_column(col, no_wrap=col in ("#", "STATUS"))
    for i, (step, st, rec) in enumerate(zip(s.steps, statuses, records, strict=True), 1):
        attempts = rec.get("attempts", 0)
        table.add_row(str(i), cell(step.title), STEP_MARK.get(st, esc(st)),
                      str(attempts) if attempts else "", f"{rec.get('hints', 0)}/"
                      f"{len(step.hints)}" if step.hints else "")
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


def scenario_overview(s: Any, progress: str | None = None) -> None:
    out = console()
    out.print(f"[bold]{esc(s.title)}[/] ({esc(s.id)}) — {esc(s.level)}, about {esc(s.duration)}"
              + (f" — your progress: {esc(progress)}" if progress else ""), width=text_width())
    if s.description:
        out.print(step_markdown(s.description), width=text_width())
    for i, step in enumerate(s.steps, 1):
        out.print(f"  {i}. {esc(step.title)} [dim]({len(step.checks)} checks, "
                  f"{len(step.hints)} hints)[/]", width=text_width())
    out.print(f"[dim]Read a step: kflab scenario show {esc(s.id)} --step N[/]",
              width=text_width())


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
