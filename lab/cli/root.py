"""The root command group and what every command group shares: the state folder, the backend
and common options. Command modules register on `cli`; nothing here holds logic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


class Obj:
    """Per-invocation context: the state folder option and the backend built from it."""

    def __init__(self, state: str | None) -> None:
        self.state_opt = state
        self.backend_opt: str | None = None  # --backend
        self.context_opt: str | None = None  # --context
        self.missing: Any = None  # a NotFound raised after what was found is printed

    @property
    def state(self) -> Path:
        from lab.state import state_dir

        return state_dir(self.state_opt)

    def choice(self) -> Any:
        """Which backend: --backend / --context, $KFLAB_BACKEND, lab.yaml, the lab, local."""
        from lab import config
        from lab.backends import choose

        return choose(self.backend_opt, self.state, context=self.context_opt,
                      profile_backend=config.default_backend())

    def backend(self, progress: bool = False) -> Any:
        from lab.backends import get_backend

        backend = get_backend(self.choice(), str(self.state))
        if progress:
            from lab.term.progress import Progress

            backend.sink = Progress()
        return backend


pass_obj = click.make_pass_decorator(Obj)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--state", envvar="KFLAB_STATE", type=click.Path(file_okay=False),
              help="State folder (default ~/.kflab; env KFLAB_STATE).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _p, value: value and (print_about(), ctx.exit()),
              help="Show kflab's version, its engines' and the pinned components', and exit.")
@click.pass_context
def cli(ctx: click.Context, state: str | None) -> None:
    """kflab: a lightweight local Kubeflow lab with checked, hands-on scenarios.

    \b
    Start here:   kflab demo                 run every scenario on the local backend
                  kflab scenario list        see the labs
                  kflab scenario start NAME  do one, guided (then: kflab check / hint / solve)
    """
    ctx.obj = Obj(state)


PROVIDER_CHOICE = click.Choice(["vagrant-virtualbox", "vagrant-libvirt", "wsl2", "host",
                                "existing"])


def profile_option(f: Any) -> Any:
    return click.option("-p", "--profile", "profile_path", envvar="KFLAB_PROFILE",
                        type=click.Path(dir_okay=False),
                        help="Lab profile (default ./lab.yaml; env KFLAB_PROFILE).")(f)


def _valid_namespace(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from lab.kube.names import NAMESPACE_HINT, namespace_problem

    problem = namespace_problem(value)
    if problem is not None:
        raise click.BadParameter(f"not a valid namespace: {problem}; {NAMESPACE_HINT}")
    return value


def _store(attr: str) -> Any:
    def callback(ctx: click.Context, _param: Any, value: Any) -> Any:
        if value is not None:
            setattr(ctx.find_object(Obj), attr, value)
        return value
    return callback


def backend_options(f: Any) -> Any:
    """--backend and --context on a workload or scenario command (stored on Obj)."""
    f = click.option("--context", expose_value=False, callback=_store("context_opt"),
                     help="Kubeconfig context of the cluster to use (implies --backend "
                          "cluster; env KFLAB_CONTEXT).")(f)
    return click.option("--backend", type=click.Choice(["local", "cluster"]),
                        expose_value=False, callback=_store("backend_opt"),
                        help="Where workloads run (default: $KFLAB_BACKEND, lab.yaml "
                             "`backend:`, the lab's cluster once `kflab up` verified it, "
                             "else local).")(f)


def namespace_option(f: Any) -> Any:
    return click.option("-n", "--namespace", default="default", show_default=True,
                        callback=_valid_namespace, help="Namespace of the resource.")(f)


def checked_name(kind: str, name: str, param: str = "NAME") -> str:
    """A resource name from the command line, checked as the API server checks `kind`."""
    from lab.kube.names import name_hint, name_problem

    problem = name_problem(kind, name)
    if problem is not None:
        raise click.BadParameter(f"not a valid {kind} name: {problem}; {name_hint(kind, name)}",
                                 param_hint=param)
    return name


def print_about(as_json: bool = False) -> None:
    """kflab's version, the engines it drives and the pinned cluster components."""
    import json

    from lab.about import about

    info = about()
    if as_json:
        click.echo(json.dumps(info.as_dict(), indent=2))
        return
    from lab.about import ENGINES

    click.echo(f"kflab {info.kflab}  (Python {info.python}, {info.system})")
    click.echo(f"content: {info.content}")
    click.echo("engines:")
    for name, version in info.engines.items():
        click.echo(f"  {name:<14} {version:<16} {ENGINES[name]}")
    click.echo("pinned cluster components (manifests/versions.yaml):")
    for name, version in info.components.items():
        click.echo(f"  {name:<20} {version}")


def say(text: str) -> None:
    click.echo(text)
