"""Workload commands, kubectl-style: apply, get, describe, delete, logs, predict."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.root import Obj, backend_options, checked_name, cli, namespace_option, pass_obj
from lab.errors import LabError


@cli.command()
@click.option("-f", "--filename", "files", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False), help="Manifest file (repeatable).")
@click.option("--validate", "validation", default="warn", show_default=True,
              type=click.Choice(["strict", "warn", "ignore", "true", "false"]),
              help="Unknown or duplicate fields: warn, fail (strict, as true) or say nothing "
                   "(ignore, as false).")
@click.option("--dry-run", is_flag=True,
              help="Cluster backend: have the API server validate everything (schema, CEL, "
                   "webhooks) without storing or running anything.")
@backend_options
@pass_obj
def apply(obj: Obj, files: tuple[str, ...], validation: str, dry_run: bool) -> None:
    """Create or replace resources from manifests and run them.

    Every document of every file is validated first: if one is invalid, nothing is applied.
    """
    from lab.kube.conditions import ready_message, summary_state
    from lab.kube.manifests import apply_document, plan, record_warnings, validation_mode
    from lab.ui import printable

    backend = obj.backend(progress=True)
    if dry_run:
        if backend.name != "cluster":
            raise LabError("--dry-run asks an API server", hint="add --backend cluster")
        backend.dry_run = True
    planned = plan(backend, [Path(f) for f in files], validation_mode(validation))
    for item in planned:
        for warning in item.warnings:
            click.echo(f"Warning: {printable(warning)}", err=True)
    record_warnings(obj.state, planned)
    failed = False
    for item in planned:
        res = apply_document(backend, item.doc, item.base_dir)
        if dry_run:
            click.echo(f"{res['kind'].lower()}/{res['metadata']['name']} valid (server dry run)")
            continue
        state = summary_state(res)
        failed |= state in ("FAILED", "Failed")
        click.echo(f"{res['kind'].lower()}/{res['metadata']['name']} {state}")
        if state == "Failed" and (why := ready_message(res)):
            click.echo(f"  {why}", err=True)
    if failed:
        sys.exit(1)


@cli.command()
@click.argument("name")
@click.option("-f", "--filename", "file", required=True,
              type=click.Path(exists=True, dir_okay=False),
              help='Request body (JSON): V1 {"instances": ...} or V2 {"inputs": ...}.')
@click.option("--protocol", type=click.Choice(["v1", "v2"]),
              help="Send with this protocol (the body is converted); default: the body's own.")
@namespace_option
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False),
              help="Also save the response to this file.")
@backend_options
@pass_obj
def predict(obj: Obj, name: str, file: str, protocol: str | None, namespace: str,
            out: str | None) -> None:
    """Send a prediction request to an InferenceService and print the response."""
    from lab.kube.inference import load_request

    checked_name("InferenceService", name)
    payload = load_request(Path(file))
    response = obj.backend().predict(name, payload, namespace, protocol)
    text = json.dumps(response, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    click.echo(text)



@cli.command()
@click.argument("kind")
@click.argument("name", required=False)
@namespace_option
@click.option("-A", "--all-namespaces", is_flag=True)
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
@backend_options
@pass_obj
def get(obj: Obj, kind: str, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> None:
    """List resources, or show one (e.g. `kflab get runs`, `kflab get isvc NAME -o yaml`)."""
    from lab.kube.kinds import lookup
    from lab.ui import resource_table

    k = lookup(kind)
    if name:
        checked_name(k.kind, name)
    choice = obj.choice()
    backend = obj.backend()
    where = describe_backend(choice, backend)
    click.echo(f"# backend: {where}", err=True)
    if name:
        found = backend.get(k.kind, name, namespace)
        if found is None:
            raise LabError(f"{k.kind} '{name}' not found in namespace '{namespace}'",
                           hint=f"list them with `kflab get {k.plural}`")
        items = [found]
    else:
        items = backend.list(k.kind, None if all_namespaces else namespace)
    if output == "table":
        resource_table(k, items, namespaces=all_namespaces)
        return
    data: Any = items[0] if name else {"apiVersion": "v1", "kind": "List", "items": items}
    _dump(data, output)


def describe_backend(choice: Any, backend: Any) -> str:
    """Which backend answers: `local (state ~/.kflab)`, `cluster (context x, namespace y)`."""
    if backend.name == "cluster":
        ctx = backend.context or "current context"
        return f"cluster ({ctx} of {backend.kubeconfig}, namespace {backend.namespace}; " \
               f"from {choice.why})"
    return f"local (state {backend.root}; from {choice.why})"


def _dump(data: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


@cli.command()
@click.argument("kind")
@click.argument("name")
@namespace_option
@backend_options
@pass_obj
def describe(obj: Obj, kind: str, name: str, namespace: str) -> None:
    """Show a resource in full, status included."""
    click.get_current_context().invoke(get, kind=kind, name=name, namespace=namespace,
                                       all_namespaces=False, output="yaml")


@cli.command()
@click.argument("kind")
@click.argument("name")
@namespace_option
@backend_options
@pass_obj
def delete(obj: Obj, kind: str, name: str, namespace: str) -> None:
    """Delete a resource and stop whatever runs for it."""
    from lab.kube.kinds import lookup

    k = lookup(kind)
    checked_name(k.kind, name)
    if not obj.backend().delete(k.kind, name, namespace):
        raise LabError(f"{k.kind} '{name}' not found in namespace '{namespace}'")
    click.echo(f"{k.kind.lower()}/{name} deleted")


@cli.command()
@click.argument("kind")
@click.argument("name")
@namespace_option
@click.option("--replica", help="One replica, e.g. worker-1 (training jobs).")
@backend_options
@pass_obj
def logs(obj: Obj, kind: str, name: str, namespace: str, replica: str | None) -> None:
    """Print a resource's logs (pipeline run, trial, job replica, model server)."""
    from lab.kube.kinds import lookup

    k = lookup(kind)
    for line in obj.backend().logs(k.kind, checked_name(k.kind, name), namespace, replica):
        click.echo(line)
