"""A guided step's checks: each one's outcome, a live line while one waits for a resource to
settle, and what the learner's last `kflab apply` warned about."""

from __future__ import annotations

from typing import Any

from lab.term.console import console, esc, printable, prose_line


def check_lines(results: list[Any]) -> None:
    for res in results:
        if res.ok:
            prose_line(f"  ✔ {res.label}", mark=("✔", "green"))
            continue
        failed = getattr(res, "failed", None)
        if failed:  # the resource failed: say so and why, never "not yet"
            lines = str(failed).splitlines()
            prose_line(f"  ✘ {res.label}: failed", style="red")
            for line in lines:
                prose_line(f"    {line}", style="red" if line == lines[0] else "")
            continue
        prose_line(f"  ✘ {res.label}: {res.message}", mark=("✘", "red"))
        prose_line(f"    {res.observed}", style="dim")


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
