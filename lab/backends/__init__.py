"""Where scenario workloads run. `get_backend()` builds local (the default) or cluster;
`choose()` says which one a command uses when it was not named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from lab.backends.base import Backend
from lab.errors import LabError

NAMES = ("local", "cluster")
ENV_VAR = "KFLAB_BACKEND"
CONTEXT_ENV = "KFLAB_CONTEXT"  # the kubeconfig context for the cluster backend
NAMESPACE_ENV = "KFLAB_NAMESPACE"  # another namespace than the lab's, for the cluster backend


class Choice(NamedTuple):
    """Which backend, and for cluster which kubeconfig/context; `why` says where it came from
    (shown by `kflab get`, saved with a guided session)."""

    name: str
    context: str | None = None
    kubeconfig: str | None = None
    why: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "context": self.context, "kubeconfig": self.kubeconfig,
                "why": self.why}

    @classmethod
    def from_dict(cls, data: Any) -> Choice:
        if not isinstance(data, dict) or data.get("name") not in NAMES:
            return cls("local", why="default")
        return cls(data["name"], data.get("context"), data.get("kubeconfig"),
                   data.get("why") or "saved")


def lab_default(state: Path) -> dict[str, Any] | None:
    """The cluster default `kflab up` recorded once the lab was verified (newest lab), or None.

    The lab record (<state>/labs/NAME/lab.json) is read as plain JSON: backends never import
    the providers that wrote it."""
    from lab.state import read_json

    labs = sorted(state.glob("labs/*/lab.json"), key=lambda p: p.stat().st_mtime)
    for path in reversed(labs):
        data = read_json(path) or {}
        default = data.get("backend")
        if isinstance(default, dict) and default.get("name") == "cluster":
            return default
    return None


def choose(flag: str | None, state: Path, *, context: str | None = None,
           kubeconfig: str | None = None, profile_backend: str = "") -> Choice:
    """--backend, else $KFLAB_BACKEND, else lab.yaml's `backend:`, else the verified lab's
    cluster, else local. `--context` alone means the cluster backend."""
    context = context or os.environ.get(CONTEXT_ENV) or None
    if flag:
        name, why = flag, "--backend"
    elif context:
        name, why = "cluster", "--context"
    elif os.environ.get(ENV_VAR):
        name, why = os.environ[ENV_VAR], f"${ENV_VAR}"
    elif profile_backend:
        name, why = profile_backend, "lab.yaml"
    else:
        lab = lab_default(state)
        if lab is not None:
            return Choice("cluster", context or lab.get("context"),
                          kubeconfig or lab.get("kubeconfig"), "the lab (kflab up)")
        name, why = "local", "default"
    if name not in NAMES:
        raise LabError(f"unknown backend '{name}' ({why})", hint="use local or cluster")
    if name == "cluster" and kubeconfig is None and context is None:
        lab = lab_default(state)
        if lab is not None:
            return Choice("cluster", lab.get("context"), lab.get("kubeconfig"), why)
    return Choice(name, context, kubeconfig, why)


def get_backend(name: str | Choice = "local", state: str | None = None, *,
                namespace: str | None = None, manager: str | None = None) -> Backend:
    """The backend by name (or Choice); local is the embedded default.

    For cluster, `namespace` is where workloads go (default: the lab namespace of
    manifests/versions.yaml) and `manager` the server-side apply field manager."""
    choice = name if isinstance(name, Choice) else Choice(name)
    if choice.name == "local":
        from lab.backends.local import LocalBackend

        return LocalBackend(state)
    if choice.name == "cluster":
        from lab.backends.cluster import ClusterBackend

        return ClusterBackend(state, context=choice.context, kubeconfig=choice.kubeconfig,
                              namespace=namespace or os.environ.get(NAMESPACE_ENV) or None,
                              manager=manager)
    raise LabError(f"unknown backend '{choice.name}'", hint="use --backend local or cluster")
