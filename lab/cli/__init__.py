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
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("\ninterrupted", err=True)
        sys.exit(130)
    except LabError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except SystemExit:
        raise

