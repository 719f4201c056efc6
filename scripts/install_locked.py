"""Install kflab and the given extras into a venv from the lock (locks/<platform>/), no resolving.

Run by scripts/setup.sh with the venv's own python:  python scripts/install_locked.py local,dev
Every line it prints on failure is one sentence that names the fix. Standard library only (it
runs before anything is installed).

Steps: the locked files of base + each extra, installed with `pip --no-deps --require-hashes`;
kflab itself editable with no build isolation (setuptools is locked: nothing is fetched to build
it); torch (with the `local` extra) only when the venv has none in pyproject's tested range, so
a GPU user's CUDA build stays; then `pip check`. A stamp records what was installed, so a second
run with the same lock does nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import platform
import re
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def fail(msg: str) -> None:
    print(f"setup.sh: {msg}", file=sys.stderr)
    raise SystemExit(1)


def platform_set() -> str:
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "arm64" if sys.platform == "darwin" else "aarch64"}.get(
        machine, machine)
    system = {"darwin": "macos"}.get(sys.platform, sys.platform)
    return f"{system}-{machine}"


def lock_files(extras: list[str]) -> list[Path]:
    plat = platform_set()
    folder = REPO / "locks" / plat
    if not folder.is_dir():
        known = ", ".join(sorted(p.name for p in (REPO / "locks").iterdir() if p.is_dir()))
        fail(f"no lock for this platform ({plat}); supported: {known}")
    files = [folder / "base.txt"]
    for extra in extras:
        path = folder / f"{extra}.txt"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in folder.glob("*.txt") if p.stem != "base"))
            fail(f"unknown extra {extra!r}; the extras are: {known}")
        files.append(path)
    return files


def stale_lock() -> list[str]:
    sys.path.insert(0, str(REPO / "scripts"))
    import lock  # the same check the lock test runs

    return lock.check()


def torch_plan(py: dict) -> tuple[str | None, str]:
    """(what to pip install or None, the line to print) for torch."""
    spec = next((r for r in py["project"]["optional-dependencies"]["local"]
                 if re.match(r"torch\b", r)), None)
    default = py.get("tool", {}).get("kflab", {}).get("torch")
    if not spec or not default:
        fail("pyproject.toml names no torch range in the local extra or no [tool.kflab] torch")
    rng = spec[len("torch"):].split(";")[0].strip()
    try:
        have = md.version("torch")
    except md.PackageNotFoundError:
        return f"torch=={default}", f"torch: installing {default} (tested range {rng})"
    if in_range(have, rng):
        return None, f"torch: keeping {have} (in the tested range {rng})"
    return f"torch=={default}", f"torch: replacing {have} (outside the tested range {rng}) " \
                                f"with {default}"


def in_range(version: str, rng: str) -> bool:
    """`2.11.0+cu128` against `>=2.11,<2.14` (the only operators pyproject uses for torch)."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])

    have = key(version)
    for clause in rng.split(","):
        m = re.match(r"\s*(>=|<|==)\s*([\d.]+)\s*$", clause)
        if not m:
            fail(f"cannot read the torch range {rng!r} in pyproject.toml (use >=, < or ==)")
        op, want = m.group(1), key(m.group(2))
        padded = have[:len(want)]
        ok = {">=": have >= want, "<": padded < want, "==": padded == want}[op]
        if not ok:
            return False
    return True


def index_reachable() -> str | None:
    """The package index's URL when it cannot be reached (None: reachable, or not needed)."""
    if os.environ.get("PIP_NO_INDEX"):
        return None
    url = os.environ.get("PIP_INDEX_URL") or subprocess.run(
        [*PIP, "config", "get", "global.index-url"], capture_output=True, text=True
    ).stdout.strip() or "https://pypi.org/simple/"
    if not url.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=10):  # noqa: S310
            return None
    except OSError:
        return url


def pip(*args: str) -> None:
    res = subprocess.run([*PIP, *args], text=True, capture_output=True)
    if res.returncode:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        fail(f"`pip {' '.join(args[:4])} ...` failed (its output is above)")


def unmet(extras: list[str]) -> list[str]:
    """kflab's own requirements (core + the extras asked for) that the venv does not satisfy:
    `pip check` looks at core requirements only, never at extras."""
    from packaging.requirements import Requirement  # installed from the lock by now

    out = []
    for raw in md.requires("kflab") or []:
        req = Requirement(raw)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ["", *extras]):
            continue
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            out.append(f"{req.name} is not installed")
            continue
        if not req.specifier.contains(have, prereleases=True):
            out.append(f"{req.name} {have} is not {req.specifier}")
    return out


def main() -> int:
    extras = [e for e in (sys.argv[1] if len(sys.argv) > 1 else "local").split(",") if e]
    problems = stale_lock()
    if problems:
        fail(f"the lock does not match pyproject.toml ({problems[0]}): "
             "run python3 scripts/lock.py, then this again")
    files = lock_files(extras)
    py = tomllib.loads((REPO / "pyproject.toml").read_text())
    torch_req, torch_line = torch_plan(py) if "local" in extras else (None, "")
    key = hashlib.sha256(b"".join(
        [sys.version.encode(), ",".join(extras).encode(), (REPO / "pyproject.toml").read_bytes(),
         *(f.read_bytes() for f in files)])).hexdigest()
    stamp = Path(sys.prefix) / ".kflab-installed"
    if stamp.is_file() and stamp.read_text() == key and torch_req is None:
        return 0
    url = index_reachable()
    if url:
        fail(f"cannot reach the package index {url} (no network?): connect, or point "
             "PIP_INDEX_URL / PIP_FIND_LINKS at a wheelhouse, then run this again")
    rel = [str(f.relative_to(REPO)) for f in files]
    print(f"installing the lock: {' + '.join(rel)}", flush=True)
    pip("install", "-q", "--no-deps", "--require-hashes",
        *(a for f in files for a in ("-r", str(f))))
    pip("install", "-q", "--no-deps", "--no-build-isolation", "-e", str(REPO))
    if torch_req:
        print(torch_line, flush=True)
        pip("install", "-q", torch_req)
    elif torch_line:
        print(torch_line)
    res = subprocess.run([*PIP, "check"], capture_output=True, text=True)
    if res.returncode:
        sys.stderr.write(res.stdout)
        fail("`pip check` found the packages above inconsistent: run "
             "python3 scripts/lock.py, or remove .venv and run setup.sh again")
    missing = unmet(extras)
    if missing:
        fail(f"the lock lacks what pyproject.toml asks for ({'; '.join(missing)}): "
             "run python3 scripts/lock.py")
    stamp.write_text(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
