#!/usr/bin/env python3
"""Regenerate the install lock (locks/) from pyproject.toml, or check that it is current.

    python3 scripts/lock.py            # maintainers: after any change to pyproject's dependencies
    python3 scripts/lock.py --check    # exit 1 when pyproject.toml and locks/ disagree (CI does)

Why a lock: pip resolving ~240 packages at install time backtracks (29 minutes, then
"resolution-too-deep", on a Python the pins did not fit). The lock is resolved once, here, by
uv for every supported Python at once (markers where a package's versions differ by Python)
and installed with `pip install --no-deps --require-hashes`: no resolution, ever.

Layout: one folder per platform set (locks/<platform>/), one file per group: `base.txt` (the
core dependencies plus the build backend, so kflab itself installs with no build isolation) and
one per extra (`local.txt`, `dev.txt`, ...), each the whole closure of core + that extra, taken
from ONE resolution per platform, so any union of them is consistent.

torch is the exception: neither it nor its CUDA runtime (nvidia-*, cuda-*, triton) is locked, so a
GPU user keeps the CUDA build they installed; its pure-Python dependencies are locked. setup.sh
installs `[tool.kflab] torch` (the version CI tests) only when no torch in pyproject's tested
range is present.

Every file starts with `# inputs: <sha256>` of what it was built from (requires-python, the
dependencies and extras, the build requirements, the platforms and this file's FORMAT);
`--check` recomputes it from pyproject.toml. Needs uv for generating (found on PATH or in
.venv/bin, else installed at UV_VERSION into ~/.cache/kflab-lock); `--check` needs nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "locks"
FORMAT = 1
UV_VERSION = "0.13.9"
# Platform sets: folder name -> the marker uv resolves for (tool.uv.environments).
PLATFORMS = {
    "linux-x86_64": "sys_platform == 'linux' and platform_machine == 'x86_64'",
    "linux-aarch64": "sys_platform == 'linux' and platform_machine == 'aarch64'",
    "macos-arm64": "sys_platform == 'darwin' and platform_machine == 'arm64'",
}
# Never locked: torch and the CUDA runtime that only torch pulls in (the GPU user's own build);
# a name matching here stays locked when anything but torch needs it (strip_unlocked).
UNLOCKED = re.compile(r"^(torch|triton|nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+)$")
NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project(root: Path = REPO) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())


def inputs_digest(py: dict) -> str:
    """What the lock depends on, canonical: any change to it makes the lock stale."""
    proj = py["project"]
    data = {
        "format": FORMAT,
        "requires-python": proj.get("requires-python", ""),
        "dependencies": proj.get("dependencies", []),
        "optional-dependencies": proj.get("optional-dependencies", {}),
        "build-requires": py.get("build-system", {}).get("requires", []),
        "platforms": PLATFORMS,
    }
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def groups(py: dict) -> list[str]:
    return ["base", *sorted(py["project"].get("optional-dependencies", {}))]


def find_uv() -> str:
    for cand in (shutil.which("uv"), REPO / ".venv" / "bin" / "uv"):
        if cand and Path(cand).is_file():
            return str(cand)
    tool = Path.home() / ".cache" / "kflab-lock" / f"uv-{UV_VERSION}"
    uv = tool / "bin" / "uv"
    if not uv.is_file():
        print(f"installing uv {UV_VERSION} into {tool}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(tool)], check=True)
        subprocess.run([str(tool / "bin" / "python"), "-m", "pip", "install", "-q",
                        f"uv=={UV_VERSION}"], check=True)
    return str(uv)


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """Split uv's requirements output into (normalized name, lines) per package."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if not line[0].isspace():
            m = NAME.match(line)
            if not m:
                raise SystemExit(f"lock.py: cannot parse uv's line: {line!r}")
            out.append((norm(m.group(1)), [line]))
        elif out:
            out[-1][1].append(line)
    return out


def via(lines: list[str]) -> set[str]:
    """The packages that need this one (uv's `# via` annotation)."""
    names: set[str] = set()
    for line in lines:
        s = line.strip()
        if s.startswith("# via"):
            s = s[len("# via"):].strip()
        elif s.startswith("#"):
            s = s.lstrip("#").strip()
        else:
            continue
        if s and NAME.match(s):
            names.add(norm(NAME.match(s).group(1)))  # type: ignore[union-attr]
    return names


def strip_unlocked(text: str) -> str:
    """Drop torch, and each CUDA-runtime package (UNLOCKED's names) that only torch or other
    dropped ones need (uv's `# via`), to a fixed point; nvidia-ml-py, which kflab needs, stays."""
    parsed = blocks(text)
    dropped = {"torch"}
    changed = True
    while changed:
        changed = False
        for name, lines in parsed:
            if name not in dropped and UNLOCKED.match(name) and via(lines) <= dropped:
                dropped.add(name)
                changed = True
    return "".join("\n".join(lines) + "\n" for name, lines in parsed if name not in dropped)


def temp_project(py: dict, marker: str) -> str:
    """The project uv resolves: pyproject's dependencies for one platform set, plus the build
    backend (kflab installs with --no-build-isolation, so setuptools comes from the lock)."""
    proj = py["project"]
    deps = [*proj.get("dependencies", []), *py.get("build-system", {}).get("requires", [])]
    lines = [
        "[project]", 'name = "kflab"', 'version = "0"',
        f"requires-python = {json.dumps(proj.get('requires-python', '>=3.11'))}",
        f"dependencies = {json.dumps(deps)}",
        "[project.optional-dependencies]",
        *(f"{json.dumps(k)} = {json.dumps(v)}"
          for k, v in proj.get("optional-dependencies", {}).items()),
        "[tool.uv]", "package = false", f"environments = {json.dumps([marker])}",
    ]
    return "\n".join(lines) + "\n"


def generate() -> None:
    py = project()
    digest, uv = inputs_digest(py), find_uv()
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    new = Path(tempfile.mkdtemp(prefix="locks-", dir=REPO))
    try:
        for plat, marker in PLATFORMS.items():
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "pyproject.toml").write_text(temp_project(py, marker))
                subprocess.run([uv, "lock", "--quiet"], cwd=tmp, env=env, check=True)
                (new / plat).mkdir(parents=True)
                for group in groups(py):
                    extra = [] if group == "base" else ["--extra", group]
                    text = subprocess.run(
                        [uv, "export", "--frozen", "--quiet", "--no-emit-project",
                         "--no-header", "--format", "requirements-txt", *extra],
                        cwd=tmp, env=env, check=True, capture_output=True, text=True).stdout
                    head = (f"# inputs: {digest}\n"
                            f"# kflab lock for {plat}, group {group!r}: generated by "
                            "`python3 scripts/lock.py` (uv "
                            f"{UV_VERSION}); do not edit. Install: pip install --no-deps "
                            "--require-hashes -r this-file\n")
                    (new / plat / f"{group}.txt").write_text(head + strip_unlocked(text))
            print(f"locked {plat}: {', '.join(groups(py))}")
        if LOCKS.exists():
            shutil.rmtree(LOCKS)
        new.rename(LOCKS)
    finally:
        if new.exists():
            shutil.rmtree(new)


def check(root: Path = REPO) -> list[str]:
    """Why the lock in root/locks is stale for root/pyproject.toml (empty when current)."""
    py, locks = project(root), root / "locks"
    digest, problems = inputs_digest(py), []
    for plat in PLATFORMS:
        for group in groups(py):
            path = locks / plat / f"{group}.txt"
            if not path.is_file():
                problems.append(f"{path.relative_to(root)} is missing")
                continue
            with path.open() as fh:
                first = fh.readline().rstrip("\n")
            if first != f"# inputs: {digest}":
                problems.append(f"{path.relative_to(root)} was built from other inputs")
    extra = {p.name for p in locks.iterdir()} - set(PLATFORMS) if locks.is_dir() else set()
    problems += [f"locks/{e} is not a platform set of scripts/lock.py" for e in sorted(extra)]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the lock is stale")
    args = ap.parse_args()
    if args.check:
        problems = check()
        for p in problems:
            print(f"lock is stale: {p}", file=sys.stderr)
        if problems:
            print("fix: python3 scripts/lock.py (pyproject.toml changed since the lock was made)",
                  file=sys.stderr)
        return 1 if problems else 0
    generate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
