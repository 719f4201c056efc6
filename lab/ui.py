"""Terminal output: tables, progress lines and summaries (rich, imported lazily).

Everything that comes from a user -- names, paths, log lines, trial parameters, messages --
goes through `esc()` (or a rich Text) before it meets rich: `/data/[/raw]` prints as written
and is never read as a style tag, and control characters are shown, not sent to the terminal.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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
    return _console


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


def resource_table(kind: Any, objects: list[dict[str, Any]], namespaces: bool = False) -> None:
    import jmespath
    import jmespath.exceptions
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    if namespaces:
        table.add_column("NAMESPACE")
    table.add_column("NAME")
    for header, _ in kind.columns:
        table.add_column(header)
    table.add_column("AGE")
    for obj in objects:
        meta = obj.get("metadata", {})
        cells = [meta.get("namespace", "")] if namespaces else []
        cells.append(meta.get("name", ""))
        for _, query in kind.columns:
            try:
                value = jmespath.search(query, obj)
            except jmespath.exceptions.JMESPathError:  # e.g. length() of a missing list
                value = None
            cells.append("" if value is None else str(value))
        cells.append(age(meta.get("creationTimestamp")))
        table.add_row(*map(cell, cells))
    if objects:
        console().print(table)
    else:
        console().print(f"No {kind.plural} found.")


class Progress:
    """Prints engine events as they happen: one line each, readable live and in CI logs."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        console()  # bind the terminal before any run redirects stdout
        self.t0 = time.monotonic()
        self.task_t0: dict[str, float] = {}
        self.trials: TrialTable | None = None

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
                out.print(f"           [yellow]{esc(res.message)}[/]")
        elif kind == "step-finished":
            res = ev["result"]
            if res.error:
                out.print(f"           [red]{esc(res.error)}[/]")
            if getattr(res, "skip_reason", None):
                out.print(f"{self._elapsed()}   [yellow]- skipped: {esc(res.skip_reason)}[/]")
        elif kind == "log":  # a line of a training replica's output, streamed live
            out.print(f"[dim]{esc(ev['replica'])} |[/] {esc(ev['line'])}", soft_wrap=True)
        elif kind == "message":
            out.print(f"{self._elapsed()}   {esc(ev['text'])}")
        elif kind == "experiment-started":
            self.trials = TrialTable(ev, self._elapsed)
        elif kind in ("trial-started", "trial-finished", "experiment-finished") and self.trials:
            self.trials.update(ev)
            if kind == "experiment-finished":
                self.trials = None


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
        out.print(f"{elapsed()}     experiment [bold]{esc(ev['experiment'])}[/]: "
                  f"{esc(ev['algorithm'])}, up to {esc(cap)} trials, {esc(ev['parallel'])} at a "
                  f"time, objective {esc(ev['metric'])}")
        if out.is_terminal:
            from rich.live import Live

            self.live = Live(self.render(), console=out, refresh_per_second=4)
            self.live.start()

    def render(self) -> Any:
        from rich.table import Table

        rows = list(self.rows.items())
        hidden = max(0, len(rows) - self.MAX_ROWS)
        caption = f"{hidden} earlier trials not shown (kflab get trials)" if hidden else None
        table = Table(box=None, header_style="bold", caption=caption, caption_justify="left")
        for col in ("TRIAL", "STATE", self.ev["metric"].upper(), "TIME", *self.ev["params"]):
            table.add_column(esc(col))
        for name, row in rows[hidden:]:
            state = row["state"]
            table.add_row(cell(name), f"[{STATE_COLOR.get(state, 'white')}]{esc(state)}[/]",
                          cell(row.get("objective") or ""),
                          f"{row['seconds']:.1f}s" if "seconds" in row else "",
                          *(cell(row["params"].get(p, "")) for p in self.ev["params"]))
        return table

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
            out.print(f"{self.elapsed()}     experiment {esc(ev['experiment'])} "
                      f"[bold]{esc(ev['condition'])}[/] ({esc(ev['reason'])}); best trial "
                      f"{esc(ev['best'] or '-')}" + (f": {esc(best)}" if best else ""))
            for plot in filter(None, (ev.get("plots") or "").split(",")):
                out.print(f"           plot: {esc(plot)}")


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


def check_lines(results: list[Any]) -> None:
    for res in results:
        if res.ok:
            console().print(f"  [green]✔[/] {esc(res.label)}")
        else:
            console().print(f"  [red]✘[/] {esc(res.label)}: {esc(res.message)}\n"
                            f"    [dim]{esc(res.observed)}[/]")


def apply_warnings(warnings: list[str]) -> None:
    """What the learner's last `kflab apply` warned about, next to a failing check: a
    misspelled field is often why a step does not pass."""
    if not warnings:
        return
    console().print("  [yellow]Your last `kflab apply` warned:[/]")
    for warning in warnings:
        console().print(f"    [yellow]Warning:[/] {esc(warning)}")


def show_step(session: Any) -> None:
    """The current step of a guided scenario in a panel, then what the learner can do next."""
    from rich.markdown import Markdown
    from rich.panel import Panel

    s, i = session.scenario, session.index
    console().print(Panel(Markdown(session.step.text),
                          title=f"{esc(s.id)} — step {i + 1}/{len(s.steps)}: "
                                f"{esc(session.step.title)}",
                          subtitle=f"work folder: {esc(session.workdir)}"))
    console().print("When done: [bold]kflab check[/]   stuck: [bold]kflab hint[/]   "
                    "show me: [bold]kflab solve[/]")


def scenario_table(items: list[Any]) -> None:
    from rich.table import Table

    from lab.scenarios.model import BACKENDS

    table = Table(header_style="bold", box=None)
    for col in ("ID", "TITLE", "LEVEL", "TIME", "STEPS", "NEEDS", "BACKENDS"):
        table.add_column(col)
    notes = []
    for s in items:
        runs = ", ".join(s.backends)
        for b in BACKENDS:
            if (why := s.why_not(b)) is not None:
                runs += f" (not {b}*)"
                notes.append(f"* {s.id} on {b}: {why}")
        table.add_row(*map(cell, (s.id, s.title, s.level, s.duration, len(s.steps),
                                  ", ".join(s.requires), runs)))
    console().print(table)
    for note in notes:  # why a scenario cannot run on a backend
        console().print(f"[dim]{esc(note)}[/]")


def scenario_overview(s: Any) -> None:
    from rich.markdown import Markdown

    out = console()
    out.print(f"[bold]{esc(s.title)}[/] ({esc(s.id)}) — {esc(s.level)}, about {esc(s.duration)}")
    if s.description:
        out.print(Markdown(s.description))
    for i, step in enumerate(s.steps, 1):
        out.print(f"  {i}. {esc(step.title)} [dim]({len(step.checks)} checks, "
                  f"{len(step.hints)} hints)[/]")


def doctor_table(rows: list[Any], title: str) -> None:
    from rich.table import Table

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
