"""WHERE the cluster lives. `get_provider(profile, state)` picks the implementation."""

from __future__ import annotations

from pathlib import Path

from lab.config import Profile
from lab.providers.base import Provider


def lab_dir(state: Path, profile: Profile) -> Path:
    """The lab's own folder in the state directory (Vagrantfile, kubeconfig, logs)."""
    from lab.state import io_error, path

    folder = path(state, "labs", profile.name)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise io_error(exc, folder, "create") from None
    return folder


def get_provider(profile: Profile, state: Path) -> Provider:
    workdir = lab_dir(state, profile)
    if profile.is_vagrant:
        from lab.providers.vagrant import VagrantProvider

        return VagrantProvider(profile, workdir)
    if profile.provider == "wsl2":
        from lab.providers.local import Wsl2Provider

        return Wsl2Provider(profile, workdir)
    if profile.provider == "host":
        from lab.providers.local import HostProvider

        return HostProvider(profile, workdir)
    from lab.providers.existing import ExistingProvider

    return ExistingProvider(profile, workdir)
