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


@pipeline.command("compile")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The compiled pipeline to write (.yaml or .json).")
@click.option("--function", help="Which @dsl.pipeline, when the file has several.")
@click.option("--index-url", help="Every step pip-installs from this package index (PEP "
              "503 simple API): an offline class's, a proxy, a company mirror.")
@click.option("--trusted-host", "trusted_hosts", multiple=True,
              help="Trust this host[:port] over plain http (default: the index's own host "
                   "when its URL is http://).")
def pipeline_compile(file: str, output: str, function: str | None, index_url: str | None,
                     trusted_hosts: tuple[str, ...]) -> None:
    """Compile FILE (a .py with a @dsl.pipeline, or a compiled YAML) for the lab's KFP
    server, with the server's own SDK version, into OUTPUT; with --index-url every step
    installs kfp and its packages from that index (kfp's pip_index_urls/pip_trusted_hosts).
    Upload OUTPUT anywhere KFP 2.16 runs pipelines."""
    import shutil
    import tempfile

    from lab.backends.cluster.pipelines import index as indexes
    from lab.backends.cluster.pipelines.compile import (
        KFP_SERVER_VERSION,
        check_index,
        compile_for_server,
        step_requirements,
    )

    src, out = Path(file).resolve(), Path(output)
    if out.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise click.BadParameter("the output ends in .yaml, .yml or .json", param_hint="-o")
    if trusted_hosts and not index_url:
        raise click.UsageError("--trusted-host needs --index-url")
    index = indexes.for_url(index_url, list(trusted_hosts)) if index_url else None
    note = ""
    with tempfile.TemporaryDirectory(prefix="kflab-compile-") as tmp:
        staged = Path(tmp) / out.name  # OUTPUT is written only when all is well
        ir = compile_for_server(src, function, staged, index=index)
        if index is not None:
            names = [n for reqs in step_requirements(ir).values() for n in reqs]
            why = indexes.probe(index, names)
            if why:
                note = f"; its packages not checked: {why}"
            else:
                check_index(ir, index, file)
                note = "; the index has every step's packages"
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staged, out)
    steps = len((ir.get("deploymentSpec") or {}).get("executors") or {})
    click.echo(f"wrote {out}: {steps} step(s), compiled by kfp {KFP_SERVER_VERSION}"
               + (f"; every step installs from {index.url}{note}" if index else ""))
