"""The console every command prints to, how wide prose is, and how user text meets rich.

Everything that comes from a user -- names, paths, log lines, trial parameters, messages --
goes through `esc()` (or a rich Text: `cell()`) before it meets rich: `/data/[/raw]` prints
as written and is never read as a style tag, and control characters are shown, not sent to
the terminal. rich is imported lazily, so `kflab --help` stays fast.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None


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


def prose_line(text: str, style: str = "", mark: tuple[str, str] | None = None) -> None:
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
