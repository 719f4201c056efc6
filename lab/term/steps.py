"""A scenario's text on the terminal: its overview, a step in a panel, and step markdown
whose code lines are fitted to the width without becoming misleading."""

from __future__ import annotations

from typing import Any, ClassVar

from lab.term.console import TEXT_WIDTH, cell, console, esc, text_width


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
            # padding (0, 1): Markdown already spaces blocks; vertical padding doubled it
            yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=False,
                         padding=(0, 1))

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
    from rich.text import Text

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
        parts = ["When done: [bold]kflab check[/]", "stuck: [bold]kflab hint[/]",
                 "show me: [bold]kflab solve[/]", "where am I: [bold]kflab scenario status[/]"]
        line = "   ".join(parts)
        if len(Text.from_markup(line)) > text_width():  # two lines, never a command cut
            line = "   ".join(parts[:2]) + "\n" + "   ".join(parts[2:])
        out.print(line, width=text_width())


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
