"""Terminal output: tables, progress lines and summaries (rich, imported lazily)."""

from __future__ import annotations

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
        _console = Console(file=sys.stdout, highlight=False)
    return _console


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
            value = jmespath.search(query, obj)
            cells.append("" if value is None else str(value))
        cells.append(age(meta.get("creationTimestamp")))
        table.add_row(*cells)
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
            out.print(f"{self._elapsed()} [bold]▶ {ev['step']}[/]: {ev['title']}")
        elif kind == "action":
            args = ev["args"]
            text = " ".join(map(str, args)) if isinstance(args, list) else (
                args if isinstance(args, str) else ", ".join(f"{k}={v}" for k, v in args.items()
                                                             if k != "arguments"))
            out.print(f"{self._elapsed()}   [cyan]{ev['verb']}[/] {text}")
        elif kind == "run-started":
            out.print(f"{self._elapsed()}     pipeline run [bold]{ev['run']}[/]: "
                      f"{len(ev['tasks'])} tasks")
        elif kind == "task-started":
            self.task_t0[ev["task"]] = time.monotonic()
        elif kind == "task-finished":
            took = time.monotonic() - self.task_t0.get(ev["task"], time.monotonic())
            color = "green" if ev["state"] == "SUCCEEDED" else "red"
            out.print(f"{self._elapsed()}       task {ev['task']} [{color}]{ev['state']}[/] "
                      f"[dim]({took:.1f}s)[/]")
        elif kind == "check":
            res = ev["result"]
            mark = "[green]✔[/]" if res.ok else "[red]✘[/]"
            line = f"{self._elapsed()}   {mark} {res.label}"
            if not res.ok or self.verbose:
                line += f" [dim]— {res.observed}[/]"
            out.print(line)
            if not res.ok:
                out.print(f"           [yellow]{res.message}[/]")
        elif kind == "step-finished":
            res = ev["result"]
            if res.error:
                out.print(f"           [red]{res.error}[/]")
            if getattr(res, "skip_reason", None):
                out.print(f"{self._elapsed()}   [yellow]- skipped: {res.skip_reason}[/]")
        elif kind == "log":  # a line of a training replica's output, streamed live
            from rich.markup import escape

            out.print(f"[dim]{escape(ev['replica'])} |[/] {escape(ev['line'])}", soft_wrap=True)
        elif kind == "message":
            out.print(f"{self._elapsed()}   {ev['text']}")
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
        out.print(f"{elapsed()}     experiment [bold]{ev['experiment']}[/]: {ev['algorithm']}, "
                  f"up to {cap} trials, {ev['parallel']} at a time, "
                  f"objective {ev['metric']}")
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
            table.add_column(col)
        for name, row in rows[hidden:]:
            state = row["state"]
            table.add_row(name, f"[{STATE_COLOR.get(state, 'white')}]{state}[/]",
                          str(row.get("objective") or ""),
                          f"{row['seconds']:.1f}s" if "seconds" in row else "",
                          *(str(row["params"].get(p, "")) for p in self.ev["params"]))
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
                extra = f" [dim]({ev['detail']})[/]" if ev["state"] != "Succeeded" else ""
                out.print(f"{self.elapsed()}       trial {ev['trial']} [{color}]{ev['state']}"
                          f"[/] {self.ev['metric']}={ev['objective']} [dim]{params} "
                          f"({ev['seconds']:.1f}s)[/]{extra}")
        if self.live is not None:
            self.live.update(self.render())
        if kind == "experiment-finished":
            if self.live is not None:
                self.live.stop()
            best = ", ".join(f"{a['name']}={a['value']}" for a in ev["assignments"])
            out.print(f"{self.elapsed()}     experiment {ev['experiment']} "
                      f"[bold]{ev['condition']}[/] ({ev['reason']}); best trial "
                      f"{ev['best'] or '-'}" + (f": {best}" if best else ""))
            for plot in filter(None, (ev.get("plots") or "").split(",")):
                out.print(f"           plot: {plot}")


def summary(results: list[ScenarioResult]) -> None:
    from rich.table import Table

    table = Table(title="kflab scenarios", header_style="bold")
    for col in ("scenario", "mode", "steps", "result", "time"):
        table.add_column(col)
    for res in results:
        passed = sum(s.status == "passed" for s in res.steps)
        table.add_row(res.id, res.mode, f"{passed}/{len(res.steps)}",
                      MARK.get(res.status, res.status), f"{res.seconds:.1f}s")
    console().print(table)


def check_lines(results: list[Any]) -> None:
    for res in results:
        if res.ok:
            console().print(f"  [green]✔[/] {res.label}")
        else:
            console().print(f"  [red]✘[/] {res.label}: {res.message}\n    [dim]{res.observed}[/]")


def show_step(session: Any) -> None:
    """The current step of a guided scenario in a panel, then what the learner can do next."""
    from rich.markdown import Markdown
    from rich.panel import Panel

    s, i = session.scenario, session.index
    console().print(Panel(Markdown(session.step.text),
                          title=f"{s.id} — step {i + 1}/{len(s.steps)}: {session.step.title}",
                          subtitle=f"work folder: {session.workdir}"))
    console().print("When done: [bold]kflab check[/]   stuck: [bold]kflab hint[/]   "
                    "show me: [bold]kflab solve[/]")
