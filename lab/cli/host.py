"""Commands about this machine and kflab itself: version, completion, doctor, init."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from lab.cli.root import PROVIDER_CHOICE, cli, profile_option


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def version(as_json: bool) -> None:
    """kflab's version, the versions of the engines it drives (kfp, optuna, torch, kserve,
    ansible-core, kubernetes) and of the pinned cluster components."""
    from lab.cli.root import print_about

    print_about(as_json)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (bash 4.4+, zsh, fish).

    \b
    bash:  kflab completion bash > ~/.kflab-complete.bash
           and add `source ~/.kflab-complete.bash` to ~/.bashrc
    zsh:   kflab completion zsh > ~/.kflab-complete.zsh
           and add `source ~/.kflab-complete.zsh` to ~/.zshrc (after compinit)
    fish:  kflab completion fish > ~/.config/fish/completions/kflab.fish
    """
    from click.shell_completion import get_completion_class

    from lab.errors import LabError

    cls = get_completion_class(shell)
    if cls is None:  # click ships all three; a future click might not
        raise LabError(f"this click has no {shell} completion", hint="upgrade click")
    click.echo(cls(cli, {}, "kflab", "_KFLAB_COMPLETE").source())




@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--provider", type=click.Choice(["local", *PROVIDER_CHOICE.choices]),
              help="Judge the host for this kind of lab (default: the profile's, else local).")
@profile_option
def doctor(as_json: bool, provider: str | None, profile_path: str | None) -> None:
    """Check this host against the lab profile: CPUs, memory, disk, virtualization, Vagrant,
    WSL, GPUs, IOMMU/VFIO, sudo, kubeconfig."""
    from pathlib import Path as _P

    from lab import config
    from lab.doctor import diagnose
    from lab.doctor.rows import Needs, as_dicts

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
        from lab.term.tables import doctor_table

        failed = [r.name for r in rows if r.status == "fail"]
        warned = any(r.status == "warn" for r in rows)
        verdict = (f"not ready: {', '.join(failed)}" if failed else
                   "ready, with warnings" if warned else "ready")
        doctor_table(rows, f"{title}: {verdict}")
    if any(r.status == "fail" for r in rows):
        sys.exit(1)


@cli.command()
@click.option("--provider", type=PROVIDER_CHOICE, required=True, help="Where the lab lives.")
@click.option("-o", "--output", default="lab.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="Where to write the profile.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(provider: str, output: str, force: bool) -> None:
    """Write a commented lab profile (lab.yaml) for a provider."""
    from lab.config import write_init

    path = Path(output)
    write_init(path, provider, force=force)
    click.echo(f"wrote {path}; next: kflab doctor, then kflab up")
