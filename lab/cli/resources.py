"""Workload commands, kubectl-style: apply, get, describe, delete, logs, predict."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.complete import resources as resources_words
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
              help="Validate without storing or running anything: on a cluster the API "
                   "server checks everything (schema, CEL, webhooks); on the local backend "
                   "kflab validates each document as its apply would (as kubectl's client "
                   "dry run).")
@backend_options
@pass_obj
def apply(obj: Obj, files: tuple[str, ...], validation: str, dry_run: bool) -> None:
    """Create or replace resources from manifests and run them.

    Every document of every file is validated first: if one is invalid, nothing is applied.
    """
    from lab.kube.conditions import FAILED_STATES, ready_message, summary_state
    from lab.kube.manifests import apply_document, plan, record_warnings, validation_mode
    from lab.term.console import printable

    backend = obj.backend(progress=True)
    if dry_run and backend.name == "cluster":
        backend.dry_run = True
    planned = plan(backend, [Path(f) for f in files], validation_mode(validation))
    for item in planned:
        for warning in item.warnings:
            click.echo(f"Warning: {printable(warning)}", err=True)
    if dry_run and backend.name != "cluster":
        for item in planned:  # plan() validated every document; nothing is stored or run
            click.echo(f"{item.ref} valid (client dry run: validated here, nothing applied)")
        return
    from lab.scenarios.guided import where_now

    record_warnings(obj.state, planned, where_now(obj.state))
    failed = False
    for item in planned:
        res = apply_document(backend, item.doc, item.base_dir)
        if dry_run:
            click.echo(f"{res['kind'].lower()}/{res['metadata']['name']} valid (server dry run)")
            continue
        state = summary_state(res)
        failed |= state in FAILED_STATES
        unchanged = getattr(backend, "last_apply", None) == "unchanged"
        if unchanged:
            state = f"unchanged ({state})"
        click.echo(f"{res['kind'].lower()}/{res['metadata']['name']} {state}")
        if unchanged:
            ns = res["metadata"].get("namespace", "default")
            click.echo(f"  nothing re-runs, as with kubectl; to run it again: kflab delete "
                       f"{res['kind'].lower()} {res['metadata']['name']}"
                       + (f" -n {ns}" if ns != "default" else ""), err=True)
        if state in FAILED_STATES and (why := ready_message(res)):
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



OUTPUT_HELP = ("Output format: name, wide, yaml, json or jsonpath=TEMPLATE (kubectl's "
               "JSONPath, e.g. jsonpath='{.items[*].metadata.name}'); default a table.")


def _output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("table", "wide", "name", "json", "yaml") or \
            value.startswith("jsonpath="):
        return value
    raise click.BadParameter(f"unknown output format {value!r}: use name, wide, yaml, json "
                             "or jsonpath=TEMPLATE")


def _resources(obj: Obj, args: tuple[str, ...], namespace: str, all_namespaces: bool,
               selector: str | None) -> tuple[Any, list[dict[str, Any]], bool]:
    """(kind, objects, named) for get/describe: names given must exist (kubectl's NotFound,
    exit 1, after printing those found)."""
    from lab.errors import NotFound
    from lab.kube import selectors
    from lab.kube.kinds import parse_refs

    refs = parse_refs(args)
    kinds = {k.kind for k, _ in refs}
    if len(kinds) > 1:
        raise LabError("one resource type at a time", hint=f"got {', '.join(sorted(kinds))}")
    kind = refs[0][0]
    reqs = selectors.parse(selector) if selector else None
    backend = obj.backend()
    if refs[0][1] is None:
        items = backend.list(kind.kind, None if all_namespaces else namespace)
        if reqs is not None:
            items = [o for o in items if selectors.matches(reqs, o)]
        return kind, items, False
    if reqs is not None:
        raise LabError("a label selector (-l) and names cannot be used together",
                       hint="drop the names, or -l")
    items, missing = [], []
    for _, name in refs:
        assert name is not None
        found = backend.get(kind.kind, checked_name(kind.kind, name), namespace)
        if found is None:
            missing.append(name)
        else:
            items.append(found)
    if missing:
        obj.missing = NotFound(
            f"{kind.kind} {', '.join(repr(m) for m in missing)} not found in namespace "
            f"'{namespace}'", hint=f"list them with `kflab get {kind.plural}`")
    return kind, items, True


@cli.command()
@click.argument("resources", nargs=-1, shell_complete=resources_words)
@namespace_option
@click.option("-A", "--all-namespaces", is_flag=True, help="List across every namespace.")
@click.option("-o", "--output", callback=_output, help=OUTPUT_HELP)
@click.option("-l", "--selector", help="Label selector, e.g. -l app=web,tier!=db.")
@backend_options
@pass_obj
def get(obj: Obj, resources: tuple[str, ...], namespace: str, all_namespaces: bool,
        output: str | None, selector: str | None) -> None:
    """List resources, or show some: `kflab get runs`, `kflab get run/first-run -o yaml`,
    `kflab get trials -l katib.kubeflow.org/experiment=random`. No type: the types."""
    from lab.term.tables import print_table, resource_table

    if not resources:
        from lab.kube.kinds import KINDS
        from lab.term.tables import Column

        print_table([Column("NAME", True), Column("SHORTNAMES", True), Column("APIVERSION"),
                     Column("KIND", True)],
                    [[k.plural, ",".join(s for s in k.short if s not in (k.kind.lower(),
                                                                         k.plural)),
                      k.api_version, k.kind] for k in KINDS])
        click.echo("\nUse: kflab get TYPE [NAME...] (or TYPE/NAME), e.g. kflab get runs",
                   err=True)
        return
    obj.missing = None
    kind, items, named = _resources(obj, resources, namespace, all_namespaces, selector)
    click.echo(f"# backend: {describe_backend(obj.choice(), obj.backend())}", err=True)
    if output in (None, "table", "wide"):
        if items or not named:
            resource_table(kind, items, namespaces=all_namespaces, wide=output == "wide")
        if named and output != "wide":
            _failures(obj, items)
    elif output == "name":
        for o in items:
            click.echo(f"{kind.kind.lower()}.{kind.group}/{o['metadata']['name']}"
                       if kind.group else f"{kind.kind.lower()}/{o['metadata']['name']}")
    else:
        asked = len(resources) if "/" in resources[0] else len(resources) - 1
        single = named and asked == 1 and len(items) == 1  # one name: the object itself
        data: Any = items[0] if single else {"apiVersion": "v1", "kind": "List",
                                             "items": items}
        _dump(data, output)
    if obj.missing is not None:
        raise obj.missing


def _failures(obj: Obj, items: list[dict[str, Any]]) -> None:
    """Below `get NAME`'s table: why each named resource failed, with its failing part's
    last log lines (a pipeline task's error) and where the whole log is."""
    from lab.backends import failures
    from lab.term.console import console, esc

    backend = obj.backend()
    for o in items:
        found = failures.explain(backend, o)
        if found is None:
            continue
        lines = found.lines()
        console().print(f"[red]{esc(o['metadata']['name'])}: {esc(lines[0])}[/]")
        for line in lines[1:]:
            console().print(f"  {esc(line)}", soft_wrap=True)


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
    elif output.startswith("jsonpath="):
        from lab.kube.jsonpath import render

        click.echo(render(output[len("jsonpath="):], data), nl=False)
    else:
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


@cli.command()
@click.argument("resources", nargs=-1, required=True, shell_complete=resources_words)
@namespace_option
@click.option("-l", "--selector", help="Label selector, e.g. -l app=web.")
@backend_options
@pass_obj
def describe(obj: Obj, resources: tuple[str, ...], namespace: str,
             selector: str | None) -> None:
    """Show resources in full, kubectl's layout, with a history from their status
    (`kflab describe exp random`, `kflab describe run/first-run`)."""
    from lab.backends import failures
    from lab.kube.describe import render

    obj.missing = None
    _, items, _ = _resources(obj, resources, namespace, False, selector)
    backend = obj.backend()
    for i, o in enumerate(items):
        found = failures.explain(backend, o)
        click.echo(("\n" if i else "") + render(o, found.lines() if found else None))
    if obj.missing is not None:
        raise obj.missing


@cli.command()
@click.argument("resources", nargs=-1, shell_complete=resources_words)
@click.option("-f", "--filename", "files", multiple=True,
              type=click.Path(exists=True, dir_okay=False),
              help="Delete what these manifests name (repeatable).")
@namespace_option
@click.option("--ignore-not-found", is_flag=True, help="Exit 0 when a resource is absent.")
@backend_options
@pass_obj
def delete(obj: Obj, resources: tuple[str, ...], files: tuple[str, ...], namespace: str,
           ignore_not_found: bool) -> None:
    """Delete resources and stop whatever runs for them: `kflab delete isvc NAME`,
    `kflab delete run/first-run`, `kflab delete -f experiment.yaml`."""
    from lab.errors import NotFound
    from lab.kube.kinds import lookup, parse_refs
    from lab.kube.manifests import load_manifests

    targets: list[tuple[str, str, str]] = []
    if files and resources:
        raise click.UsageError("give -f FILE or resources, not both")
    for f in files:  # every document is read and checked before anything is deleted
        for doc in load_manifests(Path(f)):
            meta = doc.data["metadata"]
            targets.append((lookup(doc.data["kind"]).kind, meta["name"],
                            meta.get("namespace") or namespace))
    for kind, name in parse_refs(resources):
        if name is None:
            raise click.UsageError(f"name the {kind.plural} to delete (or use -f FILE)")
        targets.append((kind.kind, checked_name(kind.kind, name), namespace))
    if not targets:
        raise click.UsageError("name what to delete: TYPE NAME, TYPE/NAME or -f FILE")
    backend = obj.backend()
    missing = []
    for kind_name, name, ns in targets:
        if backend.delete(kind_name, name, ns):
            click.echo(f"{kind_name.lower()}/{name} deleted")
        else:
            missing.append(f"{kind_name} '{name}' not found in namespace '{ns}'")
    if missing and not ignore_not_found:
        raise NotFound("; ".join(missing))


@cli.command()
@click.argument("resources", nargs=-1, required=True, shell_complete=resources_words)
@namespace_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines while it runs.")
@click.option("--tail", type=click.IntRange(min=0),
              help="Only the last N lines (of each replica or trial).")
@click.option("--replica", help="One PyTorchJob or TFJob replica (e.g. worker-1), or one "
              "TrainJob node (node-1).")
@click.option("--task", help="One pipeline task, e.g. train-svm.")
@backend_options
@pass_obj
def logs(obj: Obj, resources: tuple[str, ...], namespace: str, follow: bool,
         tail: int | None, replica: str | None, task: str | None) -> None:
    """Print a resource's logs (pipeline run or one --task, trial, job or one --replica,
    model server): `kflab logs run first-run --task train-svm`, `kflab logs ptj/x -f`."""
    from lab.kube.kinds import parse_refs

    refs = parse_refs(resources)
    if len(refs) != 1 or refs[0][1] is None:
        raise click.UsageError("name one resource: TYPE NAME or TYPE/NAME")
    kind, name = refs[0]
    assert name is not None
    if replica is not None and kind.kind not in ("PyTorchJob", "TFJob", "TrainJob"):
        raise LabError(f"--replica selects a training job's replica; a {kind.kind} has none",
                       hint="a pipeline run's step: --task NAME" if kind.kind == "PipelineRun"
                       else "drop --replica")
    if task is not None and kind.kind != "PipelineRun":
        raise LabError(f"--task selects a pipeline run's task; a {kind.kind} has none",
                       hint=f"a {kind.kind} replica: --replica NAME"
                       if kind.kind in ("PyTorchJob", "TFJob", "TrainJob") else "drop --task")
    lines = obj.backend().logs(kind.kind, checked_name(kind.kind, name), namespace,
                               replica or task, follow=follow, tail=tail)
    for line in lines:
        click.echo(line)
