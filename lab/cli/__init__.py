"""kflab's command line. The entry point imports nothing but `lab.fastpath` first: an
unchanged, all-cached `kflab pipeline run` is answered there, before click, the command
tree (lab/cli/app.py) and the backends are imported; every other command line goes to the
command tree unchanged."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cli", "main"]


def main() -> None:
    from lab import fastpath

    code = fastpath.answer(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    try:
        from lab.cli.app import main as full
    except Exception as exc:  # the command tree itself does not load: click, rich... broken
        from lab import deps

        found = deps.diagnose(exc)
        if found is None:
            raise
        sys.stderr.write(f"error: {found[0]}\n  fix: {found[1]}\n")
        sys.exit(2)
    full()


def __getattr__(name: str) -> Any:
    """`from lab.cli import cli` and the others: the command tree, imported on first use."""
    if name.startswith("__") or name == "app":  # a submodule: the import system's
        raise AttributeError(name)
    import importlib

    app = importlib.import_module("lab.cli.app")
    try:
        return getattr(app, name)
    except AttributeError:
        raise AttributeError(f"module 'lab.cli' has no attribute {name!r}") from None
