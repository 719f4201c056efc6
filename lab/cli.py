"""kflab's command tree: parse, call, print. No logic lives here; heavy modules load lazily
so that `kflab --help` starts fast."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from lab import __version__
from lab.errors import LabError


class Obj:
    def __init__(self, state: str | None) -> None:
        self.state_opt = state

    @property
    def state(self) -> Path:
        from lab.state import state_dir

        return state_dir(self.state_opt)

    def backend(self, progress: bool = False) -> Any:
        from lab.backends import get_backend

        backend = get_backend("local", str(self.state))
        if progress:
            from lab.ui import Progress

            backend.sink = Progress()
        return backend


pass_obj = click.make_pass_decorator(Obj)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--state", envvar="KFLAB_STATE", type=click.Path(file_okay=False),
              help="State folder (default ~/.kflab; env KFLAB_STATE).")
@click.version_option(__version__, prog_name="kflab")
@click.pass_context
def cli(ctx: click.Context, state: str | None) -> None:
    """kflab: a lightweight local Kubeflow lab with checked, hands-on scenarios.

    \b
    Start here:   kflab demo                 run every scenario on the local backend
                  kflab scenario list        see the labs
                  kflab scenario start NAME  do one, guided (then: kflab check / hint / solve)
    """
    ctx.obj = Obj(state)


@cli.command()
def version() -> None:
    """Print kflab's version."""
    click.echo(f"kflab {__version__}")


PROVIDER_CHOICE = click.Choice(["vagrant-virtualbox", "vagrant-libvirt", "wsl2", "host",
                                "existing"])


def _profile_option(f: Any) -> Any:
    return click.option("-p", "--profile", "profile_path", envvar="KFLAB_PROFILE",
                        type=click.Path(dir_okay=False),
                        help="Lab profile (default ./lab.yaml; env KFLAB_PROFILE).")(f)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--provider", type=click.Choice(["local", *PROVIDER_CHOICE.choices]),
              help="Judge the host for this kind of lab (default: the profile's, else local).")
@_profile_option
def doctor(as_json: bool, provider: str | None, profile_path: str | None) -> None:
    """Check this host against the lab profile: CPUs, memory, disk, virtualization, Vagrant,
    WSL, GPUs, IOMMU/VFIO, sudo, kubeconfig."""
    from pathlib import Path as _P

    from lab import config
    from lab.doctor import Needs, as_dicts, diagnose

    if provider == "local" or (provider is None and not profile_path
                               and not _P(config.PROFILE_FILE).exists()):
        needs, title = Needs(provider="local"), "local"
    else:
        prof = config.resolve(profile_path, provider)
        needs, title = Needs.from_profile(prof), f"{prof.provider}, {prof.source or 'defaults'}"
    rows = diagnose(needs)
    if as_json:
        click.echo(json.dumps(as_dicts(rows), indent=2))
    else:
        from rich.table import Table

        from lab.ui import console

        table = Table(title=f"kflab doctor ({title})", header_style="bold")
        for col in ("check", "result", "observed", "advice"):
            table.add_column(col)
        colors = {"pass": "green", "warn": "yellow", "fail": "red"}
        for r in rows:
            table.add_row(r.name, f"[{colors[r.status]}]{r.status}[/]", r.observed, r.advice)
        console().print(table)
    if any(r.status == "fail" for r in rows):
        sys.exit(1)


@cli.command()
@click.option("--provider", type=PROVIDER_CHOICE, required=True, help="Where the lab lives.")
@click.option("-o", "--output", default="lab.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="Where to write the profile.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(provider: str, output: str, force: bool) -> None:
    """Write a commented lab profile (lab.yaml) for a provider."""
    from lab.config import init_text

    path = Path(output)
    if path.exists() and not force:
        raise LabError(f"{path} exists", hint="edit it, or pass --force to overwrite")
    path.write_text(init_text(provider))
    click.echo(f"wrote {path}; next: kflab doctor, then kflab up")


# --- scenarios ---------------------------------------------------------------------------

@cli.group()
def scenario() -> None:
    """List, read, run and test scenarios."""


@scenario.command("list")
@click.option("--json", "as_json", is_flag=True)
def scenario_list(as_json: bool) -> None:
    """List the available scenarios."""
    from lab.scenarios.loader import load_all

    items = load_all()
    if as_json:
        click.echo(json.dumps([{"id": s.id, "title": s.title, "level": s.level,
                                "duration": s.duration, "requires": list(s.requires),
                                "steps": len(s.steps)} for s in items], indent=2))
        return
    from rich.table import Table

    from lab.ui import console

    table = Table(header_style="bold", box=None)
    for col in ("ID", "TITLE", "LEVEL", "TIME", "STEPS", "NEEDS"):
        table.add_column(col)
    for s in items:
        table.add_row(s.id, s.title, s.level, s.duration, str(len(s.steps)),
                      ", ".join(s.requires))
    console().print(table)


@scenario.command("show")
@click.argument("name")
def scenario_show(name: str) -> None:
    """Show a scenario's description and steps."""
    from rich.markdown import Markdown

    from lab.scenarios.loader import find
    from lab.ui import console

    s = find(name)
    out = console()
    out.print(f"[bold]{s.title}[/] ({s.id}) — {s.level}, about {s.duration}")
    if s.description:
        out.print(Markdown(s.description))
    for i, step in enumerate(s.steps, 1):
        out.print(f"  {i}. {step.title} [dim]({len(step.checks)} checks, "
                  f"{len(step.hints)} hints)[/]")


@scenario.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False), required=True)
def scenario_validate(paths: tuple[str, ...]) -> None:
    """Validate scenario folders (for authors); errors name file, line and field."""
    from lab.scenarios.loader import load_scenario

    for p in paths:
        s = load_scenario(Path(p))
        click.echo(f"ok  {s.id}: {len(s.steps)} steps")


def _run_many(obj: Obj, names: tuple[str, ...], all_: bool, mode: str, json_out: str | None,
              junit_out: str | None) -> None:
    from lab.scenarios import report
    from lab.scenarios.loader import find, load_all
    from lab.scenarios.runner import run_scenario
    from lab.ui import Progress, console, summary

    if all_:
        scenarios = [s for s in load_all() if "local" in s.backends]
    elif names:
        scenarios = [find(n) for n in names]
    else:
        raise click.UsageError("name one or more scenarios, or give --all")
    results = []
    for s in scenarios:
        console().rule(f"[bold]{s.id}[/] ({mode})")
        results.append(run_scenario(s, obj.state, mode=mode, sink=Progress()))
    summary(results)
    if json_out:
        report.write_json(results, Path(json_out))
    if junit_out:
        report.write_junit(results, Path(junit_out))
    if not all(r.ok for r in results):
        sys.exit(1)


def _report_options(f: Any) -> Any:
    f = click.option("--junit", "junit_out", type=click.Path(dir_okay=False),
                     help="Write results as JUnit XML.")(f)
    f = click.option("--json", "json_out", type=click.Path(dir_okay=False),
                     help="Write results as JSON.")(f)
    f = click.option("--all", "all_", is_flag=True, help="Every scenario the backend runs.")(f)
    return click.argument("names", nargs=-1)(f)


def _mode_command(mode: str, doc: str) -> None:
    @scenario.command(mode if mode == "test" else "run", help=doc)
    @_report_options
    @pass_obj
    def command(obj: Obj, names: tuple[str, ...], all_: bool, json_out: str | None,
                junit_out: str | None) -> None:
        _run_many(obj, names, all_, mode, json_out, junit_out)


_mode_command("auto", "Run scenarios unattended (auto mode): each step's solution, then "
                      "its checks.")
_mode_command("test", "Test scenarios: each step's checks must FAIL before its solution and PASS "
                      "after.")


def _show_step(session: Any) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel

    from lab.ui import console

    s, i = session.scenario, session.index
    console().print(Panel(Markdown(session.step.text),
                          title=f"{s.id} — step {i + 1}/{len(s.steps)}: {session.step.title}",
                          subtitle=f"work folder: {session.workdir}"))
    console().print("When done: [bold]kflab check[/]   stuck: [bold]kflab hint[/]   "
                    "show me: [bold]kflab solve[/]")


@scenario.command("start")
@click.argument("name")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Where your files go (default ./NAME).")
@click.option("--restart", is_flag=True, help="Forget saved progress and begin again.")
@pass_obj
def scenario_start(obj: Obj, name: str, workdir: str | None, restart: bool) -> None:
    """Start (or resume) a scenario in guided mode."""
    from lab.scenarios import guided
    from lab.scenarios.loader import find

    s = find(name)
    session = guided.start(s, obj.state, Path(workdir or s.id), restart=restart)
    if session.finished:
        click.echo(f"'{s.id}' is already complete; use --restart to do it again.")
        return
    _show_step(session)


@cli.command()
@click.option("--wait", default=5.0, show_default=True,
              help="Seconds to wait for resources that are still settling.")
@pass_obj
def check(obj: Obj, wait: float) -> None:
    """Verify the current step of the scenario in progress."""
    from lab.scenarios import guided
    from lab.ui import check_lines, console

    session = guided.active(obj.state)
    step = session.step
    ok, results = guided.check(session, wait)
    check_lines(results)
    if not ok:
        console().print(f"[red]Step '{step.title}' is not done yet.[/] "
                        "Try `kflab hint` for help.")
        sys.exit(1)
    console().print(f"[green]Step '{step.title}' passed.[/]")
    if session.finished:
        console().print(f"[bold green]Scenario '{session.scenario.id}' complete. Well done![/]")
    else:
        _show_step(session)


@cli.command()
@pass_obj
def hint(obj: Obj) -> None:
    """Show the next hint for the current step."""
    from lab.scenarios import guided

    session = guided.active(obj.state)
    n, total, text = guided.hint(session)
    if text is None:
        click.echo("No more hints for this step. `kflab solve` shows the reference solution.")
    else:
        click.echo(f"Hint {n}/{total}: {text}")


@cli.command()
@pass_obj
def solve(obj: Obj) -> None:
    """Run the reference solution of the current step, then check it."""
    from lab.scenarios import guided

    session = guided.active(obj.state)
    for line in guided.solve(session):
        click.echo(f"  {line}")
    click.get_current_context().invoke(check)


@cli.command()
@click.option("--json", "json_out", type=click.Path(dir_okay=False))
@click.option("--junit", "junit_out", type=click.Path(dir_okay=False))
@pass_obj
def demo(obj: Obj, json_out: str | None, junit_out: str | None) -> None:
    """Run every scenario the local backend supports, unattended, with a summary."""
    _run_many(obj, (), True, "auto", json_out, junit_out)


# --- resources ---------------------------------------------------------------------------

@cli.command()
@click.option("-f", "--filename", "files", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False), help="Manifest file (repeatable).")
@pass_obj
def apply(obj: Obj, files: tuple[str, ...]) -> None:
    """Create or replace resources from manifests and run them."""
    from lab.kube.manifests import apply_document, load_manifests

    backend = obj.backend(progress=True)
    docs = [(Path(f), doc) for f in files for doc in load_manifests(Path(f))]
    failed = False
    for path, doc in docs:
        res = apply_document(backend, doc, path.parent.resolve())
        state = _state_of(res)
        failed |= state in ("FAILED", "Failed")
        click.echo(f"{res['kind'].lower()}/{res['metadata']['name']} {state}")
        if state == "Failed" and (why := _ready_message(res)):
            click.echo(f"  {why}", err=True)
    if failed:
        sys.exit(1)


def _state_of(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    if "state" in status:
        return str(status["state"])
    conds = status.get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    if ready is not None:  # KServe-style readiness: apply has waited, so False means failed
        return {"True": "Ready", "False": "Failed"}.get(ready.get("status"), "Pending")
    return str(conds[-1]["type"]) if conds else "created"


def _ready_message(obj: dict[str, Any]) -> str:
    conds = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), {})
    return f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")


@cli.command()
@click.argument("name")
@click.option("-f", "--filename", "file", required=True,
              type=click.Path(exists=True, dir_okay=False),
              help='Request body (JSON): V1 {"instances": ...} or V2 {"inputs": ...}.')
@click.option("--protocol", type=click.Choice(["v1", "v2"]),
              help="Send with this protocol (the body is converted); default: the body's own.")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False),
              help="Also save the response to this file.")
@pass_obj
def predict(obj: Obj, name: str, file: str, protocol: str | None, namespace: str,
            out: str | None) -> None:
    """Send a prediction request to an InferenceService and print the response."""
    from lab.kube.inference import load_request

    payload = load_request(Path(file))
    response = obj.backend().predict(name, payload, namespace, protocol)
    text = json.dumps(response, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    click.echo(text)


@cli.group()
def pipeline() -> None:
    """Run KFP pipelines."""


@pipeline.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="Run name (default: the file's name).")
@click.option("--function", help="Which @dsl.pipeline, when the file has several.")
@click.option("-p", "--param", "params", multiple=True, help="Pipeline argument name=value.")
@pass_obj
def pipeline_run(obj: Obj, file: str, name: str | None, function: str | None,
                 params: tuple[str, ...]) -> None:
    """Run a pipeline file (a .py with a @dsl.pipeline) and record the run."""
    from lab.backends.local.pipelines import parse_arguments
    from lab.scenarios.actions import pipeline_run_manifest

    path = Path(file).resolve()
    manifest = pipeline_run_manifest(path.name, name or path.stem.replace("_", "-"),
                                     parse_arguments(list(params)), function)
    res = obj.backend(progress=True).apply(manifest, base_dir=path.parent)
    status = res["status"]
    click.echo(f"pipelinerun/{res['metadata']['name']} {status['state']}")
    if status.get("error"):
        click.echo(status["error"]["message"], err=True)
        click.echo(f"log: {status['log']}", err=True)
    if status["state"] != "SUCCEEDED":
        sys.exit(1)


@cli.command()
@click.argument("kind")
@click.argument("name", required=False)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--all-namespaces", is_flag=True)
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
@pass_obj
def get(obj: Obj, kind: str, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> None:
    """List resources, or show one (e.g. `kflab get runs`, `kflab get isvc NAME -o yaml`)."""
    from lab.kube.kinds import lookup
    from lab.ui import resource_table

    k = lookup(kind)
    backend = obj.backend()
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


def _dump(data: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


@cli.command()
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@pass_obj
def describe(obj: Obj, kind: str, name: str, namespace: str) -> None:
    """Show a resource in full, status included."""
    click.get_current_context().invoke(get, kind=kind, name=name, namespace=namespace,
                                       all_namespaces=False, output="yaml")


@cli.command()
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@pass_obj
def delete(obj: Obj, kind: str, name: str, namespace: str) -> None:
    """Delete a resource and stop whatever runs for it."""
    from lab.kube.kinds import lookup

    k = lookup(kind)
    if not obj.backend().delete(k.kind, name, namespace):
        raise LabError(f"{k.kind} '{name}' not found in namespace '{namespace}'")
    click.echo(f"{k.kind.lower()}/{name} deleted")


@cli.command()
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--replica", help="One replica, e.g. worker-1 (training jobs).")
@pass_obj
def logs(obj: Obj, kind: str, name: str, namespace: str, replica: str | None) -> None:
    """Print a resource's logs (pipeline run, trial, job replica, model server)."""
    from lab.kube.kinds import lookup

    for line in obj.backend().logs(lookup(kind).kind, name, namespace, replica):
        click.echo(line)


# --- the lab (providers + Ansible) ---------------------------------------------------------

def _say(text: str) -> None:
    click.echo(text)


@cli.command()
@_profile_option
@click.option("--provider", type=PROVIDER_CHOICE, help="Override the profile's provider.")
@click.option("--only", help="Run only these roles (comma-separated: node,k3s,gpu,kubeflow,"
              "verify).")
@click.option("--playbook", type=click.Path(exists=True, dir_okay=False),
              help="Another site playbook (for developers of the roles).")
@click.option("--ask-become-pass", is_flag=True, help="Ask for the sudo password (host, wsl2).")
@click.option("--force", is_flag=True, help="Start even when `kflab doctor` reports a failure.")
@pass_obj
def up(obj: Obj, profile_path: str | None, provider: str | None, only: str | None,
       playbook: str | None, ask_become_pass: bool, force: bool) -> None:
    """Create the lab: the node (VM, WSL, this host), then k3s and Kubeflow with Ansible.

    Re-running converges: after a failure, fix the cause and run `kflab up` again.
    """
    from lab import config, lifecycle

    profile = config.resolve(profile_path, provider)
    res = lifecycle.up(profile, obj.state, _say,
                       only=[r.strip() for r in only.split(",") if r.strip()] if only else None,
                       playbook=Path(playbook).resolve() if playbook else None,
                       ask_become_pass=ask_become_pass, force=force)
    click.echo(f"lab {profile.name} is up ({res['seconds']:.0f}s); next: kflab status")


@cli.command()
@click.option("--name", help="Which lab (default: the latest).")
@click.option("--json", "as_json", is_flag=True)
@pass_obj
def status(obj: Obj, name: str | None, as_json: bool) -> None:
    """The lab: VM, node, each component's readiness, allocatable GPUs, endpoints."""
    from dataclasses import asdict

    from lab import lifecycle
    from lab.status import gather

    profile, prov = lifecycle.provider_for(obj.state, name)
    rep = gather(profile, prov, prov.kubeconfig())
    if as_json:
        click.echo(json.dumps({**asdict(rep), "ready": rep.ready}, indent=2))
    else:
        click.echo(f"lab {rep.lab} ({rep.provider}): {rep.vm} — {rep.vm_detail}")
        if rep.api:
            click.echo(f"  api: {rep.api}")
        for n in rep.nodes:
            click.echo(f"  node {n['name']}: {'Ready' if n['ready'] else 'NotReady'} "
                       f"{n['version']}, nvidia.com/gpu allocatable: {n['gpus']}")
        for comp, c in rep.components.items():
            click.echo(f"  {comp:<18} {'Ready' if c['ready'] else 'NotReady':<9} {c['detail']}")
        for comp, how in rep.endpoints.items():
            click.echo(f"  {comp} UI: {how}")
        if rep.error:
            click.echo(f"  error: {rep.error}", err=True)
    if not rep.ready:
        sys.exit(1)


@cli.command()
@click.option("--destroy", is_flag=True, help="Delete the VM / k3s and its disk too.")
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def down(obj: Obj, destroy: bool, name: str | None) -> None:
    """Stop local background processes (model servers) and the lab (VM halt; --destroy
    removes it)."""
    from lab import lifecycle

    stopped = obj.backend().down()
    click.echo(f"stopped {len(stopped)} process(es)" + (f": {', '.join(stopped)}"
                                                       if stopped else ""))
    if lifecycle.down(obj.state, _say, destroy=destroy, name=name):
        click.echo("lab destroyed" if destroy else "lab stopped (kflab up starts it again)")


@cli.command()
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def ssh(obj: Obj, name: str | None) -> None:
    """Open a shell on the lab's node."""
    import os

    from lab import lifecycle

    _, prov = lifecycle.provider_for(obj.state, name)
    argv = prov.ssh_argv()
    os.execvp(argv[0], argv)  # noqa: S606 - argv from the provider, no shell


@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write it here (0600) instead of printing its path.")
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def kubeconfig(obj: Obj, output: str | None, name: str | None) -> None:
    """The lab's kubeconfig: print its path, or copy it (mode 0600) with -o."""
    from lab import lifecycle
    from lab.providers.existing import write_private

    _, prov = lifecycle.provider_for(obj.state, name)
    src = prov.kubeconfig()
    if not src.exists():
        raise LabError("the lab has no kubeconfig yet", hint="run `kflab up`")
    if output:
        write_private(Path(output), src.read_text())
        click.echo(f"wrote {output} (0600); use: export KUBECONFIG={Path(output).resolve()}")
    else:
        click.echo(str(src))


@cli.command("open")
@click.argument("what", type=click.Choice(["pipelines", "katib"]))
@click.option("--port", default=0, type=int, help="Local port (default: a free one).")
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def open_(obj: Obj, what: str, port: int, name: str | None) -> None:
    """Forward a UI to 127.0.0.1 and print its URL (Ctrl-C stops it)."""
    import time

    from lab import lifecycle
    from lab.kube.client import api_client, port_forward, service_target
    from lab.status import ENDPOINTS

    _, prov = lifecycle.provider_for(obj.state, name)
    namespace, service, path = ENDPOINTS[what]
    api = api_client(prov.kubeconfig())
    pod, target = service_target(api, namespace, service)
    with port_forward(api, namespace, pod, target, port) as local:
        click.echo(f"{what}: http://127.0.0.1:{local}{path}  (forwarding to {namespace}/{pod}"
                   f":{target}; Ctrl-C to stop)")
        while True:
            time.sleep(3600)


# --- components (the lab profile) -----------------------------------------------------------

@cli.group()
def components() -> None:
    """The lab profile: pinned components, their order and their footprint."""


_upstream_opt = click.option(
    "--upstream", envvar="KFLAB_UPSTREAM", required=True,
    type=click.Path(exists=True, file_okay=False),
    help="An extracted kubeflow/manifests release tree (env KFLAB_UPSTREAM).")


@components.command("list")
def components_list() -> None:
    """Components in install order, with their pinned versions."""
    from lab.components.catalog import load

    for c in load().components:
        needs = f"  (needs {', '.join(c.requires)})" if c.requires else ""
        gpu = "  [GPU nodes only]" if c.gpu_only else ""
        click.echo(f"{c.name:<18} {c.version}{needs}{gpu}")


@components.command("footprint")
@_upstream_opt
@click.option("-c", "--component", "names", multiple=True,
              help="Only these (default: the whole lab profile, GPU parts excluded).")
@click.option("--json", "as_json", is_flag=True)
def components_footprint(upstream: str, names: tuple[str, ...], as_json: bool) -> None:
    """Summed CPU/memory requests and limits of the rendered set, per component."""
    from lab.components.footprint import gib, lab_footprint

    rows = lab_footprint(Path(upstream), names)
    total = rows[-1][1]
    if as_json:
        click.echo(json.dumps({n: {"cpu_requests": float(f.cpu_requests),
                                   "memory_requests_bytes": int(f.memory_requests),
                                   "cpu_limits": float(f.cpu_limits),
                                   "memory_limits_bytes": int(f.memory_limits),
                                   "pods": f.pods, "containers_without_memory_request":
                                   f.unbounded} for n, f in rows},
                              indent=2))
        return
    click.echo(f"{'COMPONENT':<18} {'PODS':>4} {'CPU REQ':>8} {'MEM REQ':>10} "
               f"{'CPU LIM':>8} {'MEM LIM':>10}")
    for name, f in rows:
        click.echo(f"{name:<18} {f.pods:>4} {f.cpu_requests:>8.2f} {gib(f.memory_requests):>10} "
                   f"{f.cpu_limits:>8.2f} {gib(f.memory_limits):>10}")
    if total.unbounded:
        click.echo(f"warning: {total.unbounded} container(s) have no memory request", err=True)


@components.command("images")
@_upstream_opt
@click.option("--gpu", is_flag=True, help="Include the GPU parts.")
def components_images(upstream: str, gpu: bool) -> None:
    """Every image the lab runs: the list an offline image bundle must hold."""
    from lab.components.render import lab_images

    for image in lab_images(Path(upstream), gpu):
        click.echo(image)


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


if __name__ == "__main__":
    main()
