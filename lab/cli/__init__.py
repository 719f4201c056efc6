"""kflab's command tree: one module per command group; each parses, calls and prints.
Heavy modules load lazily inside the commands so that `kflab --help` starts fast."""

from __future__ import annotations

import sys

import click

from lab.cli import components, guided, host, lab, pipeline, resources, scenario  # noqa: F401
from lab.cli.root import cli
from lab.errors import LabError

__all__ = ["cli", "main"]


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
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except OSError as exc:  # a file the OS refused (full disk, read-only, permissions...)
        from lab.state import io_error

        click.secho(f"error: {io_error(exc, exc.filename, 'use')}", fg="red", err=True)
        sys.exit(2)
    except SystemExit:
        raise

