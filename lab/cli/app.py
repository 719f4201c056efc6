"""kflab's command tree: one module per command group; each parses, calls and prints.
Heavy modules load lazily inside the commands so that `kflab --help` starts fast.
`lab.cli.main` (the console entry point) gives the start-up fast path its chance first."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click

from lab.cli import (  # noqa: F401
    box,
    bundle,
    components,
    debug,
    grading,
    guided,
    host,
    lab,
    notebook,
    pipeline,
    resources,
    scenario,
    teaching,
    webui,
)
from lab.cli.root import cli
from lab.errors import LabError
from lab.term.console import printable

__all__ = ["cli", "main"]

# Exit codes: 1 a workload or check failed, 2 bad input (LabError) or an environment to repair
# (lab/deps.py), 70 a bug in kflab
# (EX_SOFTWARE: the safety net below), 130 interrupted.
EXIT_BUG = 70


def main() -> None:
    from lab import signals

    signals.install()  # SIGTERM and SIGHUP clean up as Ctrl-C does
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort as exc:  # click turns KeyboardInterrupt into Abort
        cause = exc.__cause__
        if isinstance(cause, KeyboardInterrupt):
            click.echo(f"stopped: {signals.reason(cause)}", err=True)
            sys.exit(signals.exit_code(cause))
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:
        click.echo(f"\nstopped: {signals.reason(exc)}", err=True)
        sys.exit(signals.exit_code(exc))
    except LabError as exc:
        from lab.term.console import echo_wrapped

        echo_wrapped(f"error: {printable(exc)}", err=True, indent="    ", fg="red")
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `kflab get runs | head -1`: the reader left, say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:  # a file the OS refused (full disk, read-only, permissions...)
        from lab.state import io_error

        click.secho(f"error: {printable(io_error(exc, exc.filename, 'use'))}", fg="red",
                    err=True)
        sys.exit(2)
    except SystemExit:
        raise
    except Exception as exc:  # last resort: a bug, never a traceback on the terminal
        from lab import deps

        found = deps.diagnose(exc)  # a package missing, broken or of another version
        if found is not None:
            from lab.term.console import echo_wrapped

            echo_wrapped(f"error: {printable(found[0])}\n  fix: {printable(found[1])}",
                         err=True, indent="    ", fg="red")
            sys.exit(2)
        report = save_traceback()
        first = printable(str(exc).splitlines()[0] if str(exc) else "")[:200]
        click.secho(f"error: unexpected {type(exc).__name__}{': ' if first else ''}{first}",
                    fg="red", err=True)
        click.echo(f"  this is a bug in kflab; the details are in {report}"
                   if report else "  this is a bug in kflab (the details could not be saved)",
                   err=True)
        sys.exit(EXIT_BUG)


def save_traceback() -> Path | None:
    """Write the current exception's traceback to a private file in the temp folder (not the
    state folder: a broken state folder may be what failed); return its path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.gettempdir()) / f"kflab-error-{stamp}-{os.getpid()}.txt"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"kflab {' '.join(map(repr, sys.argv[1:]))}\n\n")
            fh.write(traceback.format_exc())
    except OSError:
        return None
    return path
