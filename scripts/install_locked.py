"""Install kflab and the given extras into a venv from the lock (locks/<platform>/), no resolving.

Run by scripts/setup.sh with the venv's own python:  python scripts/install_locked.py local,dev
Every line it prints on failure is one sentence that names the fix. Standard library only (it
runs before anything is installed).

Steps: the locked files of base + each extra, installed with `pip --no-deps --require-hashes`;
kflab itself editable with no build isolation (setuptools is locked: nothing is fetched to build
it); torch (with the `local` extra) only when the venv has none in pyproject's tested range, so
a GPU user's CUDA build stays; then `pip check`. A stamp records what was installed, so a second
run with the same lock does nothing.

Progress: a cold install takes minutes, so each package is named as pip gets it and as it is
installed, "[k/N]" of the packages this run installs (on a terminal one line, rewritten in
place; piped, a line each). pip prints nothing while it installs, so the install count comes
from the venv itself: a package is installed once its .dist-info folder appears.

KFLAB_TORCH_FIND_LINKS: a folder or URL of wheels that pip searches for torch alone (given with
--find-links to that one install): a wheelhouse holding the CPU build, since torch==X from PyPI
is the multi-GB CUDA build on Linux. scripts/test.sh sets it from PIP_FIND_LINKS.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import platform
import re
import subprocess
import sys
import sysconfig
import threading
import tomllib
import urllib.request
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def say(msg: str, file: object = None) -> None:
    """A line of progress; on a terminal wrapped between words, continuation lines indented
    (a long path must not be cut in the middle at 80 columns)."""
    out = file or sys.stdout
    if out.isatty():  # type: ignore[attr-defined]
        import shutil
        import textwrap

        width = max(40, shutil.get_terminal_size().columns - 1)
        msg = "\n".join(textwrap.wrap(msg, width, subsequent_indent="    ",
                                      break_long_words=False, break_on_hyphens=False)) or msg
    print(msg, file=out, flush=True)


def fail(msg: str) -> None:
    say(f"setup.sh: {msg}", file=sys.stderr)
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


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Progress:
    """"[k/N] what name version" lines: rewritten in place on a terminal, one each when piped."""

    def __init__(self, out=None) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty()
        self.width = 0

    def show(self, text: str) -> None:
        if self.tty:
            cols = max(40, os.get_terminal_size(self.out.fileno()).columns - 1)
            self.out.write("\r\033[K" + text[:cols])
            self.width = len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def line(self, text: str) -> None:
        """A line that stays (after any progress line)."""
        self.done()
        self.out.write(text + "\n")
        self.out.flush()

    def done(self) -> None:
        if self.tty and self.width:
            self.out.write("\r\033[K")
            self.out.flush()
        self.width = 0


# "Collecting NAME==VERSION" from an index; "Processing .../NAME-VERSION-...whl" from a folder
COLLECT = re.compile(r"^(?:Collecting (\S+?)==(\S+)|Processing \S*?([A-Za-z0-9][\w.]*?)-"
                     r"(\d[^-\s/]*?)(?:-[^\s/]+\.whl|\.tar\.gz|\.zip)\b)")
SIZE = re.compile(r"^\s+(?:Downloading|Using cached) \S+ \(([^)]+)\)")
SATISFIED = re.compile(r"^Requirement already satisfied: (\S+?)==")
INSTALLING = re.compile(r"^Installing collected packages: (.*)$")


def dist_infos(site: Path) -> set[str]:
    """The .dist-info folders in SITE (NAME-VERSION.dist-info: an upgrade makes a new one)."""
    return {p.name for p in site.glob("*.dist-info")} if site.is_dir() else set()


def _dist_name(folder: str) -> str:
    return _canon(folder[:-len(".dist-info")].rsplit("-", 1)[0])


def pip_locked(files: list[Path], site: Path, show: Progress,
               pip_cmd: list[str] = PIP) -> tuple[int, int]:
    """`pip install --no-deps --require-hashes` of the lock files, with a line per package as
    pip gets it and as it is installed: (packages installed, packages already there)."""
    total = len({_canon(m.group(1)) for f in files for m in
                 re.finditer(r"^([A-Za-z0-9][\w.-]*)==", f.read_text(), re.M)})
    argv = [*pip_cmd, "install", "--no-deps", "--require-hashes", "--progress-bar", "off",
            *(a for f in files for a in ("-r", str(f)))]
    tail: deque[str] = deque(maxlen=60)
    got = have = 0
    last = ""
    todo: list[str] = []
    stop = threading.Event()

    def watch_installs() -> None:  # pip installs in the order it printed, silently
        before = dist_infos(site)
        shown = -1
        while not stop.wait(0.5):
            now = {_dist_name(f) for f in dist_infos(site) - before}
            k = sum(1 for n in todo if _canon(n) in now)
            if k != shown and k < len(todo):
                show.show(f"  [{k + 1}/{len(todo)}] installing {todo[k]}")
                shown = k

    watcher = threading.Thread(target=watch_installs, daemon=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    pending = ""  # piped: a package's line waits for its size (one line per package)

    def flush() -> None:
        nonlocal pending
        if pending:
            show.show(pending)
            pending = ""

    for line in proc.stdout:
        tail.append(line)
        if m := COLLECT.match(line):
            flush()
            got += 1
            name, version = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            last = f"  [{got + have}/{total}] getting {_canon(name)} {version}"
            if show.tty:
                show.show(last)
            else:
                pending = last
        elif (m := SIZE.match(line)) and last:
            pending = ""
            show.show(f"{last} ({m.group(1)})")
        elif SATISFIED.match(line):
            have += 1
        elif m := INSTALLING.match(line):
            flush()
            todo = [n.strip() for n in m.group(1).split(",") if n.strip()]
            show.line(f"  {got} package(s) downloaded or cached, {have} already installed; "
                      f"installing {len(todo)}")
            watcher.start()
    rc = proc.wait()
    flush()
    stop.set()
    if watcher.is_alive():
        watcher.join()
    show.done()
    if rc:
        sys.stderr.write("".join(tail))
        fail("`pip install --no-deps --require-hashes -r ...` failed (its output is above)")
    return len(todo), have


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
        say(f"the lock is installed already ({', '.join(extras) or 'no extras'}): nothing to do")
        return 0
    url = index_reachable()
    if url:
        fail(f"cannot reach the package index {url} (no network?): connect, or point "
             "PIP_INDEX_URL / PIP_FIND_LINKS at a wheelhouse, then run this again")
    rel = [str(f.relative_to(REPO)) for f in files]
    say(f"installing the lock: {' + '.join(rel)}")
    site = Path(sysconfig.get_paths()["purelib"])
    n, _ = pip_locked(files, site, Progress())
    say(f"  {n} package(s) installed")
    say("installing kflab itself (editable, from this checkout)")
    pip("install", "-q", "--no-deps", "--no-build-isolation", "-e", str(REPO))
    if torch_req:
        links = os.environ.get("KFLAB_TORCH_FIND_LINKS", "").strip()
        say(torch_line + (f" (also looking in {links})" if links else "")
            + ": the largest package, a minute or more")
        pip("install", "-q", *(["--find-links", links] if links else []), torch_req)
    elif torch_line:
        say(torch_line)
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
