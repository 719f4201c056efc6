"""Where scenario workloads run. `get_backend()` picks local (the default) or cluster."""

from __future__ import annotations

from lab.backends.base import Backend


def get_backend(name: str = "local", state: str | None = None) -> Backend:
    """The backend by name; local is the embedded default."""
    if name == "local":
        from lab.backends.local import LocalBackend

        return LocalBackend(state)
    from lab.errors import LabError

    raise LabError(f"unknown backend '{name}'", hint="use --backend local")
