"""kflab's own bugs told apart from a broken or incomplete environment.

A command that fails because a package kflab depends on is missing, of the wrong version or
does not import is not a bug in kflab: the learner needs the name of the package, the extra
it belongs to, and the command that repairs the environment (`bash scripts/setup.sh` in a
clone, pip in a wheel install). This module answers that from kflab's own distribution
metadata (its requirements and their extras) and from the installed distributions, with the
standard library only: it runs when click, rich or PyYAML may be what is broken, and only
after a command has already failed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

from lab import content

# Module names whose distribution is named otherwise (for a package that is not installed,
# importlib.metadata cannot say which distribution would have provided it).
_DIST_OF = {"yaml": "pyyaml", "sklearn": "scikit-learn", "re2": "google-re2",
            "pynvml": "nvidia-ml-py", "markdown_it": "markdown-it-py",
            "jsonpath_ng": "jsonpath-ng", "vagrant": "python-vagrant",
            "ansible": "ansible-core", "xgboost": "xgboost-cpu", "tensorflow": "tensorflow-cpu",
            "testinfra": "pytest-testinfra", "dask": "dask", "distributed": "dask"}
_EXTRA = re.compile(r"""extra\s*==\s*["']([\w.-]+)["']""")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> dict[str, tuple[str, str | None]]:
    """kflab's requirements for this platform: normalised distribution name -> (the
    requirement as written, without its marker; the extra it belongs to, None for the base
    install). A requirement for another platform (xgboost on macOS) is left out."""
    try:
        reqs = metadata.requires("kflab") or []
    except metadata.PackageNotFoundError:
        return {}
    try:
        from packaging.markers import Marker
    except ImportError:  # packaging itself broken: markers are not evaluated
        Marker = None
    out: dict[str, tuple[str, str | None]] = {}
    for req in reqs:
        spec, _, marker = req.partition(";")
        name = re.split(r"[\s<>=!~\[;(]", spec.strip(), maxsplit=1)[0]
        found = _EXTRA.search(marker)
        extra = found.group(1) if found else None
        if marker.strip() and Marker is not None and not _applies(Marker, marker, extra):
            continue
        out.setdefault(_norm(name), (spec.strip(), extra))
    return out


def _applies(marker_type: Any, marker: str, extra: str | None) -> bool:
    """Whether a requirement's marker holds on this platform (an unreadable one: yes)."""
    try:
        return bool(marker_type(marker).evaluate({"extra": extra or ""}))
    except Exception:
        return True


def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def extras() -> list[str]:
    """kflab's extras for users (dev left out), in pyproject's order; [] without metadata."""
    found = [extra for _, extra in requirements().values() if extra and extra != "dev"]
    return list(dict.fromkeys(found))


def installed_extras() -> list[str]:
    """The extras whose every base-named requirement is installed, in pyproject's order."""
    extras: dict[str, bool] = {}
    for dist, (_, extra) in requirements().items():
        if extra is not None and extra != "dev":
            extras[extra] = extras.get(extra, True) and _installed(dist) is not None
    return [e for e, ok in extras.items() if ok]


def repair(extra: str | None = None) -> str:
    """The command that installs kflab's locked environment again: every extra installed now,
    so nothing the learner has goes missing. A missing `extra` is `install_extras`' job."""
    if extra and extra not in installed_extras():
        return install_extras(extra)
    clone = content.clone()
    extras = installed_extras()
    if clone is not None:
        return f"{_cd(clone)}bash scripts/setup.sh" + (f" {','.join(extras)}" if extras else "")
    return _pip(extras)


def install_extras(*extras: str) -> str:
    """The one command that adds kflab's `extras` (tf, notebooks, sdk) to this installation;
    every message about a missing extra says it. From a clone (scripts/setup.sh beside the
    package), setup.sh with `local` and only those extras: it installs the locked versions on
    top of what is there, and removes nothing. Otherwise pip, from where kflab came."""
    clone = content.clone()
    if clone is not None:
        return f"{_cd(clone)}bash scripts/setup.sh {','.join(dict.fromkeys(['local', *extras]))}"
    return _pip(list(dict.fromkeys(extras)))


def _cd(clone: Path) -> str:
    return "" if Path.cwd().resolve() == clone.resolve() else f"cd {clone} && "


def _pip(extras: list[str]) -> str:
    """pip's command for kflab with `extras`: by name when kflab came from an index (pip
    records no direct_url.json then, PEP 610), else from the wheel or folder it came from --
    a bare name would fetch whatever PyPI calls kflab, not this kflab."""
    name = f"kflab[{','.join(extras)}]" if extras else "kflab"
    url = _installed_from()
    return f"pip install '{name} @ {url}'" if url else f"pip install '{name}'"


def _installed_from() -> str | None:
    """The URL kflab was installed from (a wheel file, a folder), or None from an index."""
    try:
        raw = metadata.distribution("kflab").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not raw:
        return None
    try:
        url = json.loads(raw).get("url")
    except (ValueError, AttributeError):
        return None
    return url if isinstance(url, str) and url else None


def _distribution(module: str) -> str:
    """The distribution a top-level module comes from (installed or not)."""
    try:
        found = metadata.packages_distributions().get(module)
    except Exception:  # a broken metadata folder must not hide the first error
        found = None
    if found:
        names = [_norm(n) for n in found]
        reqs = requirements()
        return next((n for n in names if n in reqs), names[0])
    return _DIST_OF.get(module, _norm(module))


def _in_installation(path: str | None) -> bool:
    """A file of an installed package (site-packages or the standard library), not kflab's
    own source."""
    if not path:
        return False
    real = os.path.realpath(path)
    own = str(Path(__file__).resolve().parent) + os.sep
    if real.startswith(own):
        return False
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots) or \
        "site-packages" in real or "dist-packages" in real


def diagnose(exc: BaseException) -> tuple[str, str] | None:
    """(what is wrong, the command that repairs it) when `exc` comes from the environment --
    an ImportError of a package that is not kflab's own, or any error while a dependency of
    kflab is not the version kflab requires --; None for kflab's own bugs."""
    if isinstance(exc, ImportError):
        found = _import_problem(exc)
        if found is not None:
            return found
    wrong = mismatched()
    if wrong:
        return (f"kflab's environment is damaged: {'; '.join(wrong)}", repair())
    return None


def _raised_in(exc: BaseException) -> str | None:
    """The top-level module of the installed package whose code raised `exc` (its innermost
    frame in site-packages), or None when kflab's own code did."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if file.startswith("<frozen"):  # the import machinery: whoever called it counts
            pass
        elif _in_installation(file):
            for root in ("site-packages", "dist-packages"):
                _, sep, rest = os.path.realpath(file).partition(os.sep + root + os.sep)
                if sep and rest:
                    found = rest.split(os.sep)[0].removesuffix(".py")
        else:
            found = None  # kflab (or the learner's code) called on after it
        tb = tb.tb_next
    return found


def _import_problem(exc: ImportError) -> tuple[str, str] | None:
    top = (exc.name or "").split(".")[0]
    if top == "lab":
        return None  # kflab's own module: a bug
    if not top or top in sys.stdlib_module_names:
        top = _raised_in(exc) or ""  # raised by a package's own code, name unknown
        if not top:
            return None
    dist = _distribution(top)
    if dist not in requirements() and _raised_in(exc) is None:
        return None  # kflab's own code imports what it does not declare: a bug
    req, extra = requirements().get(dist, (None, None))
    version = _installed(dist)
    if isinstance(exc, ModuleNotFoundError) and version is None and \
            (exc.name or "").split(".")[0] == top:
        if extra is not None:
            return (f"{dist} is not installed: it comes with kflab's `{extra}` extra, which "
                    "this command needs", repair(extra))
        return (f"kflab's environment is damaged: {dist} is missing"
                + (f" (kflab needs {req})" if req else ""), repair())
    detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    have = f"{dist} {version}" if version else dist
    need = f"; kflab needs {req}" if req and req != dist else ""
    return (f"kflab's environment is damaged: {have} does not import ({detail}){need}",
            repair(extra))


def mismatched() -> list[str]:
    """kflab's requirements that are installed at a version outside what kflab requires
    ("rich 10.0.0 installed, kflab needs rich>=13"), base and extras alike."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion
    except ImportError:  # packaging itself is broken: nothing more to say
        return []
    out = []
    for dist, (spec, _) in requirements().items():
        version = _installed(dist)
        if version is None:
            continue
        try:
            if not Requirement(spec).specifier.contains(version, prereleases=True):
                out.append(f"{dist} {version} installed, kflab needs {spec}")
        except (InvalidRequirement, InvalidVersion):
            continue
    return out
