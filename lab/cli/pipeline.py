"""`kflab pipeline run`: run a KFP pipeline file and record the run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lab.cli.root import Obj, backend_options, checked_name, cli, pass_obj


@cli.group()
def pipeline() -> None:
    """Run KFP pipelines."""


@pipeline.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="Run name: at most 63 lower-case letters, digits and '-' "
              "(default: derived from the file's name).")
@click.option("--function", help="Which @dsl.pipeline, when the file has several.")
@click.option("-p", "--param", "params", multiple=True, help="Pipeline argument name=value.")
@click.option("--parallelism", type=click.IntRange(min=1),
              help="Most tasks running at once (local backend; default: the CPU cores).")
@click.option("--no-cache", is_flag=True,
              help="Run every task again instead of reusing cached results.")
@backend_options
@pass_obj
def pipeline_run(obj: Obj, file: str, name: str | None, function: str | None,
                 params: tuple[str, ...], parallelism: int | None, no_cache: bool) -> None:
    """Run a pipeline: a .py with a @dsl.pipeline, or the YAML that
    kfp.compiler.Compiler().compile() writes. Record the run."""
    from lab.backends.local.pipelines.runner import parse_arguments
    from lab.kube.names import slug
    from lab.scenarios.actions import pipeline_run_manifest

    path = Path(file).resolve()
    run_name = checked_name("PipelineRun", name, "--name") if name is not None \
        else slug(path.stem, "PipelineRun", fallback="pipeline")
    manifest = pipeline_run_manifest(path.name, run_name, parse_arguments(list(params)),
                                     function, parallelism=parallelism,
                                     cache=False if no_cache else None)
    backend = obj.backend(progress=True)
    res = backend.apply(manifest, base_dir=path.parent)
    status = res["status"]
    click.echo(f"pipelinerun/{res['metadata']['name']} {status['state']}")
    if status["state"] != "SUCCEEDED":
        from lab.backends.failures import explain

        found = explain(backend, res)  # the failing task's own error, not just its name
        for line in found.lines() if found else [(status.get("error") or {}).get("message", "")]:
            click.echo(line, err=True)
        sys.exit(1)
