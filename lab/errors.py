"""Errors a user can act on. The CLI prints them without a traceback."""

from __future__ import annotations


class LabError(Exception):
    """An error with a message written for the user: what is wrong and how to fix it."""

    exit_code = 2  # bad input or a state the user must fix

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  fix: {self.hint}" if self.hint else base


class NotFound(LabError):
    """A named resource does not exist: exit code 1, as kubectl's `NotFound`."""

    exit_code = 1


class InputError(LabError):
    """Bad input in a user file: names the file, the field (and line when known) and the fix."""

    def __init__(
        self,
        file: str | None,
        field: str | None,
        problem: str,
        *,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = file or "<input>"
        if len(where) > 200:  # a hostile path: its ends are enough to recognise it
            where = f"{where[:120]}...{where[-60:]}"
        if line is not None:
            where += f":{line}"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {problem}", hint=hint)
        self.file, self.field, self.line, self.problem = file, field, line, problem


class ToolMissing(LabError):
    """A lab's provider tool is not installed. One line: what is missing, how to install it,
    and how to forget the lab instead (a record must never be stuck behind a missing tool)."""

    def __init__(self, tool: str, lab: str, provider: str, install: str) -> None:
        self.short = f"{tool} is not installed, and lab {lab!r} runs on {provider}"
        super().__init__(f"{self.short}: {install}, or forget the lab with "
                         "`kflab down --destroy --force`")
        self.tool = tool
