"""`kflab notebook compile`: a notebook's tagged cells become a pipeline file."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.root import cli


@cli.group()
def notebook() -> None:
    """Turn Jupyter notebooks into pipelines (tags: docs/notebooks.md)."""


@notebook.command("compile")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The pipeline file to write (default: NOTEBOOK_pipeline.py beside it).")
@click.option("--name", help="Pipeline name (default: the notebook's metadata.kflab."
              "pipeline_name, else its file name).")
@click.option("--package", "packages", multiple=True,
              help="A package every step installs on a cluster (repeatable; default: the "
                   "notebook's metadata.kflab.packages).")
@click.option("--image", help="Base image of every step on a cluster.")
def compile_(file: str, output: str | None, name: str | None, packages: tuple[str, ...],
             image: str | None) -> None:
    """Compile cells tagged step:NAME / prev:NAME into a KFP pipeline file; the notebook is
    read, never run. Then: kflab pipeline run NOTEBOOK_pipeline.py --name RUN"""
    from lab.nbcompile import compile_notebook

    done = compile_notebook(Path(file), Path(output) if output else None, name=name,
                            packages=list(packages) if packages else None, image=image)
    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    params = ", ".join(f"{k}={v!r}" for k, v in done.parameters.items()) or "none"
    click.echo(f"wrote {done.path} (pipeline {done.name}: steps {', '.join(done.steps)}; "
               f"parameters {params})")
    click.echo(f"run it: kflab pipeline run {done.path.name} --name {done.name}")
