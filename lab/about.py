"""What this kflab is: its version, the engines it drives and the cluster components it pins.

A bug report needs all three, and `kflab --version` must stay fast, so engine versions come
from the installed distributions' metadata (importlib.metadata) without importing them.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata

from lab import __version__, content
from lab.errors import LabError

NOT_INSTALLED = "not installed"
# Distribution name -> what kflab drives with it.
ENGINES = {
    "kfp": "pipelines (kfp.local)",
    "optuna": "tuning (Katib algorithms)",
    "torch": "training (PyTorchJob replicas)",
    "tensorflow-cpu": "training (TFJob replicas; the tf extra)",
    "jupyterlab": "notebooks (Notebook servers; the notebooks extra)",
    "nbformat": "notebook compile",
    "kserve": "serving (model server)",
    "ansible-core": "installer (kflab up)",
    "kubernetes": "cluster API client",
}


@dataclass(frozen=True)
class About:
    kflab: str
    python: str
    system: str
    content: str
    engines: dict[str, str]
    components: dict[str, str]  # pinned artifacts and components, or {"error": why}

    def as_dict(self) -> dict[str, object]:
        return {"kflab": self.kflab, "python": self.python, "system": self.system,
                "content": self.content, "engines": self.engines,
                "components": self.components}


def dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


def pinned() -> dict[str, str]:
    """k3s and the Kubeflow release from versions.yaml's artifacts, then each component."""
    from lab.components.catalog import load

    cat = load()
    out = {name: cat.artifacts[name].version for name in ("k3s", "kubeflow-manifests")
           if name in cat.artifacts}
    out.update((c.name, c.version) for c in cat.components)
    return out


def about() -> About:
    try:
        components, where = pinned(), str(content.root())
    except LabError as exc:  # a broken install still tells its own version
        components, where = {"error": str(exc).splitlines()[0]}, "missing"
    return About(kflab=__version__, python=platform.python_version(),
                 system=f"{platform.system()} {platform.machine()}", content=where,
                 engines={name: dist_version(name) for name in ENGINES},
                 components=components)
