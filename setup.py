"""Build-time layout (the rest of the metadata is in pyproject.toml).

The repository keeps its content at the top level (manifests/, playbooks/, scenarios/,
vagrant/: DESIGN.md fixes that layout). A wheel must carry it, so each folder is mapped into
the package as `lab._content.<folder>` (its subfolders as subpackages, so setuptools knows
every folder it copies); MANIFEST.in grafts the folders into the sdist and include-package-data
copies their files into the wheel, so a wheel rebuilt from the sdist has the same files.
Editable installs leave the folders where they are: lab/content.py finds them in either place.
"""

from setuptools import find_namespace_packages, setup

CONTENT = ("manifests", "playbooks", "scenarios", "vagrant")
SKIP = ["__pycache__", "*.__pycache__"]

mapped = {f"lab._content.{folder}": folder for folder in CONTENT}
content = [f"{pkg}.{sub}" for pkg, folder in mapped.items()
           for sub in find_namespace_packages(where=folder, exclude=SKIP)]

setup(
    packages=[*find_namespace_packages(include=["lab", "lab.*"], exclude=SKIP),
              *mapped, *content],
    package_dir=mapped,
)
