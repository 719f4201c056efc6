"""`kflab box ...`: a Vagrant box baked from an offline bundle, one VM per student."""

from __future__ import annotations

import time
from pathlib import Path

import click

from lab.cli.root import Obj, cli, pass_obj, profile_option, say


@cli.group()
def box() -> None:
    """Baked Vagrant boxes for a class (each student's VM starts with nothing downloaded)."""


@box.command("build")
@click.option("--bundle", "bundle_dir", required=True,
              type=click.Path(exists=True, file_okay=False),
              help="The offline bundle (`kflab bundle create`) to provision from; verified "
                   "first.")
@profile_option
@click.option("--lab", "lab_name", help="Bake an existing lab's VM (converged from the bundle "
              "first) instead of a new one; it is powered off, not destroyed.")
@click.option("-o", "--output", default="box", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the .box and metadata.json.")
@click.option("--version", "box_version", default=lambda: time.strftime("%Y.%m.%d"),
              show_default="today, YYYY.MM.DD", help="The box version in metadata.json.")
@click.option("--keep", is_flag=True, help="Keep the build VM (default: destroyed after).")
@pass_obj
def box_build(obj: Obj, bundle_dir: str, profile_path: str | None, lab_name: str | None,
              output: str, box_version: str, keep: bool) -> None:
    """Provision a VM from BUNDLE (node and k3s roles, k3s not started; images where k3s
    imports them at start), clean and zero it, and package a Vagrant box with its metadata
    (name, version, provider, sha256) for `vagrant box add` / `kflab up --box`."""
    from lab import config
    from lab.teaching import box as boxes

    profile = None if lab_name else config.resolve(profile_path, None)
    res = boxes.build(Path(bundle_dir), profile, obj.state, Path(output), version=box_version,
                      say=say, lab=lab_name, keep=keep)
    click.echo(f"wrote {res['box']} ({res['size'] / 2**30:.2f} GiB, sha256 {res['sha256']}) "
               f"and {res['metadata']}: box {res['name']} {res['version']} ({res['provider']});"
               f" provisioned in {res['provision_seconds']:.0f}s, packaged in "
               f"{res['seconds']:.0f}s")
    click.echo(f"hand out both files; students run `kflab up --box {res['metadata']}`")
