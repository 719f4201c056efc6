"""`kflab bundle ...`: everything `kflab up` and the labs download, in one verified folder."""

from __future__ import annotations

import platform
from pathlib import Path

import click

from lab.cli.root import cli

ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(),
                                                                     platform.machine())


@cli.group()
def bundle() -> None:
    """Offline bundles for a class with no network."""


def _parts(only: str | None, no_wheels: bool) -> tuple[str, ...]:
    from lab.teaching.bundle import PARTS

    if only is None:
        parts = list(PARTS)
    else:
        parts = [p.strip() for p in only.split(",") if p.strip()]
        bad = [p for p in parts if p not in PARTS]
        if bad or not parts:
            raise click.BadParameter(f"{', '.join(bad) or 'nothing given'}: choose from "
                                     f"{', '.join(PARTS)}", param_hint="--only")
    if no_wheels:
        parts = [p for p in parts if p != "wheels"]
    return tuple(parts)


@bundle.command("create")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--arch", default=ARCH, show_default=True, type=click.Choice(["amd64", "arm64"]),
              help="The lab machines' architecture (release files and images).")
@click.option("--upstream", envvar="KFLAB_UPSTREAM", type=click.Path(exists=True,
                                                                      file_okay=False),
              help="An extracted kubeflow/manifests tree to read the components' images "
                   "from (default: the list kflab ships, made from the pinned release).")
@click.option("--images-file", type=click.Path(exists=True, dir_okay=False),
              help="Or exactly these images, one reference per line.")
@click.option("--all-runtimes", is_flag=True,
              help="Every image the components can run, not only what the labs use (every "
                   "KServe serving runtime, Katib algorithm and example).")
@click.option("--gpu", is_flag=True, help="Include the GPU parts' images.")
@click.option("--extras", default="local", show_default=True,
              help="kflab extras for the wheelhouse (local: the students' laptops).")
@click.option("--only", help="Only these parts, comma-separated: artifacts (k3s, the "
                             "manifests), images, index (the pipeline steps' packages), "
                             "wheels (e.g. --only wheels: a wheelhouse).")
@click.option("--index-package", "index_packages", multiple=True, metavar="REQUIREMENT",
              help="A package (pip requirement) the class's own pipeline steps install, "
                   "besides the labs' (repeatable).")
@click.option("--no-wheels", "no_wheels", is_flag=True, help="Leave the wheelhouse out.")
@click.option("--dry-run", is_flag=True,
              help="Print the images and their download size from the registries' manifests; "
                   "download nothing.")
def bundle_create(dest: str, arch: str, upstream: str | None, images_file: str | None,
                  all_runtimes: bool, gpu: bool, extras: str, only: str | None,
                  index_packages: tuple[str, ...], no_wheels: bool, dry_run: bool) -> None:
    """Download every pinned artifact, image and wheel into DEST, verified, with a manifest
    of sha256s (bundle.json). Needs network; the bundle then needs none."""
    from lab.teaching import bundle as bundles
    from lab.teaching import imageset

    if upstream and images_file:
        raise click.UsageError("give --upstream or --images-file, not both")
    parts = _parts(only, no_wheels)
    chosen: list[imageset.Chosen] = []
    if "images" in parts:
        if images_file:
            from lab.yamlio import read_text

            text = read_text(Path(images_file))
            chosen = [imageset.Chosen(line.strip(), ["--images-file"]) for line in
                      text.splitlines()
                      if line.strip() and not line.lstrip().startswith("#")]
        else:
            chosen = imageset.select(gpu=gpu, all_runtimes=all_runtimes,
                                     upstream=Path(upstream) if upstream else None)
    if dry_run:
        _dry_run(chosen, arch)
        return
    manifest = bundles.create(Path(dest), arch=arch, images=[c.image for c in chosen],
                              say=click.echo, extras=extras, parts=parts,
                              index_packages=list(index_packages))
    size = sum((Path(dest) / f).stat().st_size for f in manifest["files"])
    sha = bundles.manifest_sha256(Path(dest))
    click.echo(f"wrote {dest}: {len(manifest['files'])} files ({size / 2**20:.1f} MiB), "
               f"{len(manifest['images'])} image(s) for linux/{arch}; parts: "
               f"{', '.join(manifest['parts'])}")
    click.echo(f"bundle.json sha256: {sha}")
    click.echo(f"write it down; in class: kflab bundle verify {dest} --expect {sha}")


def _dry_run(chosen: list, arch: str) -> None:
    from lab.errors import LabError
    from lab.teaching import skopeo

    planned = skopeo.plan([c.image for c in chosen], arch)
    width = max([len(p.ref) for p in planned] + [5])
    total, failed = 0, 0
    for p, c in zip(planned, chosen, strict=True):
        if p.size is None:
            failed += 1
            click.echo(f"{p.ref:<{width}}  {'?':>10}  {p.error}")
            continue
        total += p.size
        click.echo(f"{p.ref:<{width}}  {p.size / 2**20:>7.1f} MiB  {', '.join(c.why)}")
    click.echo(f"{len(planned)} image(s) for linux/{arch}: {total / 2**30:.2f} GiB to download "
               f"(compressed, from the registries' manifests)"
               + (f"; {failed} cannot be had" if failed else ""))
    if failed:
        raise LabError(f"{failed} image(s) cannot be copied for linux/{arch} (above)",
                       hint="fix the names, or pick images built for this architecture")


@bundle.command("verify")
@click.argument("dest", type=click.Path(exists=True, file_okay=False))
@click.option("--expect", metavar="SHA256",
              help="The sha256 of bundle.json that `kflab bundle create` printed: proves the "
                   "whole bundle is the one that was made.")
def bundle_verify(dest: str, expect: str | None) -> None:
    """Check every file of a bundle against its sha256 in bundle.json (and, with --expect,
    bundle.json itself)."""
    from lab.teaching import bundle as bundles

    manifest = bundles.verify(Path(dest), expect=expect)
    click.echo(f"{dest}: {len(manifest['files'])} files verified"
               + (" and bundle.json is the expected one" if expect else
                  f"; bundle.json sha256 {bundles.manifest_sha256(Path(dest))} (compare it "
                  "with the one you wrote down, or pass --expect)"))
