"""A run's engine events as they happen (steps, actions, pipeline tasks, checks, image
pulls, Katib trials): one line each, readable live and in CI logs."""

from __future__ import annotations

import time
from typing import Any

from lab.term.console import console, esc, hanging
from lab.term.trials import TrialTable


class Progress:
    """Prints engine events as they happen: one line each, readable live and in CI logs."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        console()  # bind the terminal before any run redirects stdout
        self.t0 = time.monotonic()
        self.task_t0: dict[str, float] = {}
        self.trials: TrialTable | None = None
        self.pulls: PullBar | None = None
        # Skip reasons printed, and the last one: a lab whose steps all need a GPU says why
        # once; "as above" stands only for the very reason just above it.
        self.said_skips: set[str] = set()
        self.last_skip: str | None = None

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
            hanging(f"{self._elapsed()}   [cyan]{esc(ev['verb'])}[/] ", esc(what))
        elif kind == "run-started":
            out.print(f"{self._elapsed()}     pipeline run [bold]{esc(ev['run'])}[/]: "
                      f"{len(ev['tasks'])} tasks")
        elif kind == "task-started":
            self.task_t0[ev["task"]] = time.monotonic()
        elif kind == "task-finished" and ev.get("cached"):
            # KFP's SKIPPED for a cache hit (v2beta1 RuntimeState: "skipped, for example,
            # due to caching"); lab/fastpath.py prints the same line, unstyled but for dim
            from lab.backends.pipeline_memo import cached_text

            out.print(f"{self._elapsed()}       task {esc(ev['task'])} {esc(ev['state'])} "
                      f"[dim]{esc(cached_text(ev))}[/]")
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
            if why and why == self.last_skip:
                out.print(f"{self._elapsed()}   [yellow]- skipped (as above)[/]")
            elif why:
                self.said_skips.add(why)
                self.last_skip = why
                hanging(f"{self._elapsed()}   [yellow]- skipped:[/] ", f"[yellow]{esc(why)}[/]")
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
