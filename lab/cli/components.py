"""`kflab components ...`: the pinned lab profile, its footprint and its image list."""

from __future__ import annotations

import json
from pathlib import Path

import click

from lab.cli.root import cli


@cli.group()
def components() -> None:
    """The lab profile: pinned components, their order and their footprint."""


_upstream_opt = click.option(
    "--upstream", envvar="KFLAB_UPSTREAM",
    type=click.Path(exists=True, file_okay=False),
    help="An extracted kubeflow/manifests release tree to render (env KFLAB_UPSTREAM; "
         "default: the data kflab ships, rendered from the pinned release).")


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
def components_footprint(upstream: str | None, names: tuple[str, ...], as_json: bool) -> None:
    """Summed CPU/memory requests and limits of the rendered set, per component."""
    from lab.components.footprint import gib, lab_footprint
    from lab.components.release import footprint_rows

    rows = lab_footprint(Path(upstream), names) if upstream else footprint_rows(names)
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
@click.option("--json", "as_json", is_flag=True, help="Each image with every place naming it.")
def components_images(upstream: str | None, gpu: bool, as_json: bool) -> None:
    """Every image the lab runs or pulls at runtime (controllers, Argo's executor, KFP's
    driver/launcher, KServe's storage initializer and model servers, Katib's suggestion and
    collector images, versions.yaml's images), each with what it is used for; `kflab bundle
    create` keeps what the labs use (or all, with --all-runtimes)."""
    from lab.components.images import lab_images
    from lab.components.release import images

    found = lab_images(Path(upstream), gpu) if upstream else images(gpu)
    if as_json:
        click.echo(json.dumps([i.as_dict() for i in found], indent=2))
        return
    for image in found:
        click.echo(image.image)


@components.command("pin")
@click.argument("specs", metavar="[NAME[=VERSION]]...", nargs=-1)
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False),
              help="The versions file to rewrite (default: manifests/versions.yaml, or env "
                   "KFLAB_VERSIONS_FILE).")
@click.option("--dry-run", is_flag=True, help="Compute and cross-check; write nothing.")
def components_pin(specs: tuple[str, ...], path: str | None, dry_run: bool) -> None:
    """Move pinned versions (maintainers; needs network): download, compute, cross-check.

    \b
    kflab components pin k3s=v1.34.2+k3s1           k3s and its airgap images
    kflab components pin kubeflow-manifests=26.03   a tag: pinned by commit + tree id
    kflab components pin                            re-verify every pin where it stands
    Sha256 values must match the release's checksum file; a git tag's archive must carry
    the tag's commit and that commit's tree. Any disagreement writes nothing.
    Sources: KFLAB_GITHUB_URL, KFLAB_GITHUB_API_URL (default github.com, api.github.com).
    """
    from lab.components.catalog import versions_file
    from lab.components.pin import Sources, pin

    target = Path(path) if path else versions_file()
    plan = pin(target, list(specs), Sources.from_env(), click.echo, dry_run=dry_run)
    for c in plan.changed:
        click.echo(f"{c.artifact}.{'.'.join(c.path)}: {c.old} -> {c.new}")
    if not plan.changed:
        click.echo(f"every pin checked; {target} unchanged")
    elif dry_run:
        click.echo(f"dry run: {target} not written")
    else:
        click.echo(f"wrote {target}; review `components:` versions and the docs by hand")
