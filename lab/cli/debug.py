"""`kflab debug`: what a maintainer needs when a lab misbehaves."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.root import Obj, cli, pass_obj


@cli.group()
def debug() -> None:
    """Collect what is needed to find out why a lab failed."""


@debug.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write the tar.gz (default: ./kflab-debug-<time>.tar.gz).")
@click.option("--name", help="Which lab (default: the latest).")
@click.option("--kubeconfig", "kubeconfig", type=click.Path(exists=True, dir_okay=False),
              help="Read the cluster through this kubeconfig (default: the lab's).")
@pass_obj
def bundle(obj: Obj, output: str | None, name: str | None, kubeconfig: str | None) -> None:
    """One tar.gz (mode 0600): versions; the local backend's records, owner records,
    progress and recent run logs; and for a lab made by `kflab up` its record, lab.yaml, the
    Ansible log, verify.json, `get -A` of kflab's kinds, the nodes, and for the kubeflow and
    lab namespaces events, pod descriptions and logs. Secrets and kubeconfigs are never read;
    every environment value, argv value and unknown annotation is redacted, and known token
    shapes in logs. Attach it to an issue."""
    from lab import lifecycle

    path, missed = lifecycle.debug_bundle(obj.state, Path(output) if output else None,
                                          name=name,
                                          kubeconfig=Path(kubeconfig) if kubeconfig else None)
    for line in missed:
        click.echo(f"not collected: {line}", err=True)
    click.echo(f"wrote {path}")
