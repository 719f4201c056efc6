"""Where kflab's own content lives: scenarios, playbooks, the Vagrantfile template, manifests.

The repository keeps that content at its top level (manifests/, playbooks/, scenarios/,
vagrant/); a wheel carries the same folders, same layout, inside the package as
`lab/_content/` (setup.py maps them there at build time). This module is the only place that
knows both homes, so every other module asks it and nothing depends on the current directory.
Relative references between the folders (the playbooks' `../manifests/...`) hold in both.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from lab.errors import LabError

PACKAGE = Path(__file__).resolve().parent  # the `lab` package folder
PACKAGED = PACKAGE / "_content"  # where a built wheel puts FOLDERS
_MARKER = Path("manifests") / "versions.yaml"


@cache
def root() -> Path:
    """The folder holding FOLDERS: the packaged copy in a wheel install, else the source tree
    around the package (a clone, or an editable install of one)."""
    if (PACKAGED / _MARKER).is_file():
        return PACKAGED
    source = PACKAGE.parent
    if (source / "pyproject.toml").is_file() and (source / _MARKER).is_file():
        return source
    raise LabError(f"kflab's content (scenarios, playbooks, manifests) is not installed next "
                   f"to {PACKAGE}",
                   hint="reinstall kflab from a wheel built with `python -m build` "
                        "(or `pip install -e .` in a clone)")


def import_root() -> Path:
    """The folder `lab` is imported from: a child process that must import this same `lab`
    puts it on PYTHONPATH (site-packages for a wheel, the clone for a checkout)."""
    return PACKAGE.parent


def clone() -> Path | None:
    """The clone kflab runs from (it has scripts/setup.sh), or None for a wheel install."""
    source = PACKAGE.parent
    return source if (source / "scripts" / "setup.sh").is_file() else None


def scenarios_dir() -> Path:
    """The bundled scenarios (one folder each)."""
    return root() / "scenarios"


def playbooks_dir() -> Path:
    """The Ansible playbooks (site.yml, roles/, group_vars/)."""
    return root() / "playbooks"


def site_playbook() -> Path:
    return playbooks_dir() / "site.yml"


def manifests_dir() -> Path:
    """versions.yaml, overlays/ and the smoke objects."""
    return root() / "manifests"


def versions_file() -> Path:
    """The bundled pins (manifests/versions.yaml)."""
    return manifests_dir() / "versions.yaml"


def overlays_dir() -> Path:
    """The lab profile's kustomize overlays (manifests/overlays)."""
    return manifests_dir() / "overlays"


def vagrant_dir() -> Path:
    """The Vagrantfile template(s)."""
    return root() / "vagrant"
