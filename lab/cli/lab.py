"""The lab itself (providers + Ansible): up, status, down, ssh, kubeconfig, open."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from lab.cli.root import (
    PROVIDER_CHOICE,
    Obj,
    backend_options,
    checked_name,
    cli,
    namespace_option,
    pass_obj,
    profile_option,
    say,
)
from lab.errors import LabError


@cli.command()
@profile_option
@click.option("--provider", type=PROVIDER_CHOICE, help="Override the profile's provider.")
@click.option("--only", help="Run only these roles (comma-separated: node,k3s,gpu,kubeflow,"
              "verify).")
@click.option("--playbook", type=click.Path(exists=True, dir_okay=False),
              help="Another site playbook (for developers of the roles).")
@click.option("--ask-become-pass", is_flag=True, help="Ask for the sudo password (host, wsl2).")
@click.option("--force", is_flag=True, help="Start even when `kflab doctor` reports a failure.")
@click.option("--dry-run", is_flag=True, help="Print what would change on the target (the "
              "VM, this machine, the cluster) and change nothing.")
@click.option("-y", "--yes", is_flag=True, help="host/wsl2: apply the changes to this machine "
              "without asking (review them with --dry-run first).")
@click.option("--bundle", "bundle_dir", type=click.Path(exists=True, file_okay=False),
              help="Install from an offline bundle (`kflab bundle create`), verified first: "
                   "no download.")
@click.option("--bundle-sha256", "bundle_sha", metavar="SHA256",
              help="With --bundle: the sha256 of its bundle.json that `kflab bundle create` "
                   "printed (proves the bundle is the one that was made).")
@click.option("--box", "box_file", type=click.Path(exists=True, dir_okay=False),
              help="Start the VM from a baked box (`kflab box build`): its metadata.json or "
                   ".box file, sha256 checked and added to Vagrant once (lab.yaml: vagrant: "
                   "box:).")
@pass_obj
def up(obj: Obj, profile_path: str | None, provider: str | None, only: str | None,
       playbook: str | None, ask_become_pass: bool, force: bool, dry_run: bool,
       yes: bool, bundle_dir: str | None, bundle_sha: str | None,
       box_file: str | None) -> None:
    """Create the lab: the node (VM, WSL, this host), then k3s and Kubeflow with Ansible.

    On this machine itself (--provider host or wsl2) it first lists what it will change
    (packages, /etc files, sysctls, modules, services, swap) and asks. Re-running converges:
    after a failure, fix the cause and run `kflab up` again.
    """
    from lab import config, lifecycle
    from lab.term.tables import verify_table

    profile = config.resolve(profile_path, provider)
    if bundle_sha and not bundle_dir:
        raise click.UsageError("--bundle-sha256 needs --bundle")
    manifest: dict = {}
    if bundle_dir:
        from lab.teaching.bundle import check_arch, machine_arch, verify

        manifest = verify(Path(bundle_dir), expect=bundle_sha)
        if profile.provider != "existing":  # the node is this machine or a VM like it
            check_arch(manifest, Path(bundle_dir), machine_arch())
        from lab.teaching.bundle import missing_images

        # a GPU lab named outright needs the GPU parts' images; `auto` may find none
        gone = missing_images(manifest, gpu=profile.gpu not in ("off", "auto"))
        if gone and not force:
            raise LabError(f"{bundle_dir}: no image {gone[0][0]} (used as: {gone[0][1]}); "
                           f"{len(gone)} image(s) the labs use are missing",
                           hint="make the bundle with its default images (no --images-file),"
                                " or start anyway with --force (k3s then pulls them, which "
                                "needs a network)")
        for image, _ in gone:
            click.echo(f"warning: the bundle has no {image}: k3s will pull it", err=True)
        click.echo(f"bundle {bundle_dir}: {len(manifest['files'])} files verified")
        profile = profile.with_overrides(offline=str(Path(bundle_dir).resolve()))
    if box_file:
        from dataclasses import replace

        profile = profile.with_overrides(vagrant=replace(profile.vagrant, box=box_file))
    roles = [r.strip() for r in only.split(",") if r.strip()] if only else None
    book = Path(playbook).resolve() if playbook else None
    if dry_run:
        shown = lifecycle.preview(profile, obj.state, say, only=roles, playbook=book,
                                  ask_become_pass=ask_become_pass, checks=not force)
        for line in shown.render():
            click.echo(line)
        click.echo("nothing was changed (dry run)")
        if shown.blockers:
            raise LabError(f"kflab up would stop: {len(shown.blockers)} problem(s) above",
                           hint="fix them, then run `kflab up --dry-run` again")
        return

    def ask(shown: object) -> bool:
        for line in shown.render():  # type: ignore[attr-defined]
            click.echo(line)
        click.echo("on this machine:")
        for kind, items in shown.own_machine_summary().items():  # type: ignore[attr-defined]
            click.echo(f"  {kind}: {'; '.join(items)}")
        return click.confirm("Apply these changes to this machine?", default=False)

    res = lifecycle.up(profile, obj.state, say, only=roles, playbook=book,
                       ask_become_pass=ask_become_pass, force=force, show_verify=verify_table,
                       confirm=ask if sys.stdin.isatty() else None, yes=yes)
    if bundle_dir and manifest.get("index") and res.get("kubeconfig") and \
            (roles is None or "kubeflow" in roles):
        _install_index(Path(res["kubeconfig"]), manifest["index"])
    click.echo(f"lab {profile.name} is up ({res['seconds']:.0f}s: "
               + ", ".join(f"{k} {v:.0f}s" for k, v in res["phases"].items())
               + "); next: kflab status")


def _install_index(kubeconfig: Path, index: dict) -> None:
    """The bundle's package index for pipeline steps, served in the lab (the image k3s
    imported from the bundle); the cluster backend then points every step at it."""
    from lab.kube.client import connect
    from lab.teaching.pipindex import URL, install

    kube = connect(kubeconfig)
    for item in install(kube, index):
        click.echo(f"  applied {item}")
    click.echo(f"class package index: every pipeline step installs from {URL} "
               f"({len(index.get('packages') or {})} packages)")


@cli.command()
@click.option("--name", help="Which lab (default: the latest).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--verify", "run_verify", is_flag=True,
              help="Re-run the verify role (real workloads on the lab) before reporting.")
@click.option("--ask-become-pass", is_flag=True, help="With --verify: ask for the sudo "
              "password (host, wsl2).")
@pass_obj
def status(obj: Obj, name: str | None, as_json: bool, run_verify: bool,
           ask_become_pass: bool) -> None:
    """The lab: VM, node, each component's readiness, allocatable GPUs, endpoints, and the
    last verify run (its time and table)."""
    from dataclasses import asdict

    from lab import lifecycle
    from lab.status import gather
    from lab.term.tables import verify_table

    if run_verify:
        lifecycle.verify_again(obj.state, say if not as_json else lambda _: None, name=name,
                               ask_become_pass=ask_become_pass)
    profile, prov = lifecycle.provider_for(obj.state, name)
    rep = gather(profile, prov, prov.kubeconfig())
    verified = lifecycle.last_verify(obj.state, profile)
    phases = lifecycle.last_phases(obj.state, profile.name)
    if as_json:
        click.echo(json.dumps({**asdict(rep), "ready": rep.ready, "last_up_seconds": phases,
                               "verify": verified.as_dict() if verified else None}, indent=2))
    else:
        click.echo(f"lab {rep.lab} ({rep.provider}): {rep.vm} — {rep.vm_detail}")
        if phases:
            click.echo("  last kflab up: " + ", ".join(f"{k} {v:.0f}s"
                                                       for k, v in phases.items()))
        if rep.api:
            click.echo(f"  api: {rep.api}")
        for n in rep.nodes:
            click.echo(f"  node {n['name']}: {'Ready' if n['ready'] else 'NotReady'} "
                       f"{n['version']}, nvidia.com/gpu allocatable: {n['gpus']}")
        for comp, c in rep.components.items():
            click.echo(f"  {comp:<18} {'Ready' if c['ready'] else 'NotReady':<9} {c['detail']}")
            if c.get("warning"):
                click.echo(f"  ! {c['warning']}", err=True)
        for comp, how in rep.endpoints.items():
            click.echo(f"  {comp} UI: {how}")
        if rep.error:
            click.echo(f"  error: {rep.error}", err=True)
        if verified:
            verify_table(verified)
        else:
            click.echo("  verify: never run on this lab (kflab status --verify runs it)")
    if not rep.ready or (run_verify and not (verified and verified.ok)):
        sys.exit(1)


@cli.command()
@click.option("--destroy", is_flag=True, help="Delete the VM / k3s and its disk too.")
@click.option("--force", is_flag=True, help="With --destroy: forget the lab even when its "
              "node cannot be removed (a missing tool, a broken record); says what is left.")
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def down(obj: Obj, destroy: bool, force: bool, name: str | None) -> None:
    """Stop local background processes (model servers) and the lab (VM halt; --destroy
    removes it)."""
    from lab import lifecycle

    if force and not destroy:
        raise click.UsageError("--force goes with --destroy")
    stopped = obj.backend().down()
    click.echo(f"stopped {len(stopped)} process(es)" + (f": {', '.join(stopped)}"
                                                       if stopped else ""))
    done = lifecycle.down(obj.state, say, destroy=destroy, name=name, force=force)
    if done:
        click.echo({"destroyed": "lab destroyed", "forgotten": "lab forgotten",
                    "stopped": "lab stopped (kflab up starts it again)"}[done])


@cli.command()
@click.option("--name", help="Which lab (default: the latest).")
@pass_obj
def ssh(obj: Obj, name: str | None) -> None:
    """Open a shell on the lab's node."""
    import os

    from lab import lifecycle

    argv = lifecycle.ssh_argv(obj.state, name)
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


# what the local backend offers instead of each cluster UI: (UI, what runs, where to look)
LOCAL_UI = {
    "pipelines": ("Kubeflow Pipelines UI", "pipelines",
                  "see runs with `kflab get runs`, `kflab describe run NAME` and "
                  "`kflab logs run NAME --task TASK`"),
    "katib": ("Katib UI", "experiments",
              "see them with `kflab get experiments`, `kflab get trials` and `kflab describe "
              "experiment NAME`; the end of each run names its plots"),
}


# what `kflab ui` shows of them (lab/webui): the local stand-in for the component's UI
LOCAL_VIEW = {"pipelines": "runs: graph, task states, outputs and logs",
              "katib": "experiments: each trial's parameters and objective"}


@cli.command("open")
@click.argument("what", type=click.Choice(["pipelines", "katib", "notebook"]))
@click.argument("resource", required=False)
@click.option("--port", default=0, type=int, help="Local port (default: a free one).")
@click.option("--name", help="Which lab (default: the latest).")
@namespace_option
@backend_options
@pass_obj
def open_(obj: Obj, what: str, resource: str | None, port: int, name: str | None,
          namespace: str) -> None:
    """Forward a UI to 127.0.0.1 and print its URL (Ctrl-C stops it); `kflab open notebook
    NAME` prints the URL of a Notebook's JupyterLab (on a cluster: forwarded)."""
    import time

    if what == "notebook":
        if resource is None:
            raise click.UsageError("name the notebook: kflab open notebook NAME")
        with obj.backend().open_notebook(checked_name("Notebook", resource),
                                         namespace) as (url, forwarding):
            click.echo(f"notebook {resource}: {url}" + ("  (forwarding; Ctrl-C to stop)"
                                                         if forwarding else ""))
            while forwarding:
                time.sleep(3600)
        return
    if resource is not None:
        raise click.UsageError(f"`kflab open {what}` takes no name")
    from lab import lifecycle
    from lab.errors import LabError

    if obj.choice().name == "local" and not lifecycle.has_lab(obj.state, name):
        raise LabError(f"the local backend has no {LOCAL_UI[what][0]} to open: it runs "
                       f"{LOCAL_UI[what][1]} on this machine, without a cluster",
                       hint=f"`kflab ui` shows them in the browser ({LOCAL_VIEW[what]}); or "
                            f"{LOCAL_UI[what][2]}; for the real UI, create a cluster lab "
                            "with `kflab up`")
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
