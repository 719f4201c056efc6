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


@bundle.command("create")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--arch", default=ARCH, show_default=True, type=click.Choice(["amd64", "arm64"]),
              help="The lab machines' architecture (release files and images).")
@click.option("--upstream", envvar="KFLAB_UPSTREAM", type=click.Path(exists=True,
                                                                      file_okay=False),
              help="An extracted kubeflow/manifests tree: bundle every image `kflab "
                   "components images` lists (env KFLAB_UPSTREAM).")
@click.option("--images-file", type=click.Path(exists=True, dir_okay=False),
              help="Or the images to bundle, one reference per line.")
@click.option("--gpu", is_flag=True, help="With --upstream: include the GPU parts' images.")
@click.option("--extras", default="local", show_default=True,
              help="kflab extras for the wheelhouse (local: the students' laptops).")
@click.option("--no-wheels", "no_wheels", is_flag=True, help="Leave the wheelhouse out.")
def bundle_create(dest: str, arch: str, upstream: str | None, images_file: str | None,
                  gpu: bool, extras: str, no_wheels: bool) -> None:
    """Download every pinned artifact, image and wheel into DEST, verified, with a manifest
    of sha256s (bundle.json). Needs network; the bundle then needs none."""
    from lab.teaching import bundle as bundles

    if upstream and images_file:
        raise click.UsageError("give --upstream or --images-file, not both")
    images: list[str] = []
    if upstream:
        from lab.components.images import lab_images

        images = [i.image for i in lab_images(Path(upstream), gpu)]
    elif images_file:
        images = [line.strip() for line in Path(images_file).read_text().splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    manifest = bundles.create(Path(dest), arch=arch, images=images, say=click.echo,
                              extras=extras, wheels=not no_wheels)
    size = sum((Path(dest) / f).stat().st_size for f in manifest["files"])
    click.echo(f"wrote {dest}: {len(manifest['files'])} files ({size / 2**20:.1f} MiB), "
               f"{len(manifest['images'])} image(s); use it with `kflab up --bundle {dest}`"
               + ("" if images else "; no images were bundled (give --upstream)"))


@bundle.command("verify")
@click.argument("dest", type=click.Path(exists=True, file_okay=False))
def bundle_verify(dest: str) -> None:
    """Check every file of a bundle against its sha256 in bundle.json."""
    from lab.teaching import bundle as bundles

    manifest = bundles.verify(Path(dest))
    click.echo(f"{dest}: {len(manifest['files'])} files verified")
