"""Fetch the upstream trees the tests read (tests/data/upstream.yaml), pinned and verified.

Why: the tests render the real Kubeflow manifests and validate against upstream CRDs and the
KFP API. CI has them in ../shared/upstream; a contributor's clone does not, and without them a
third of the integration tests would skip. This script gives any clone with network the same
folders, byte for byte: each tree is downloaded at its pinned commit as a GitHub archive, its
commit id (pax header) and git tree id are checked (lab/components/gittree.py: archive bytes are
not a stable pin, their content is), the part the tests read is kept, and the kept folder's own
git tree id must be the pinned `tree_kept`. Nothing unverified is left in place.

Where the tests look (tests/conftest.py, the same order): $KFLAB_SHARED, else ../shared (when
it has upstream/), else .cache/shared in this repository, which this script fills.

Usage: python scripts/fetch_upstream.py [--dest DIR] [--print-trees]
  --dest DIR      fill DIR/upstream instead (default: where the tests look; nothing is fetched
                  when that is ../shared or $KFLAB_SHARED)
  --print-trees   print each kept folder's tree id (to move a pin) instead of checking it
Downloads come from https://github.com, or $KFLAB_GITHUB_URL (a mirror or a loopback test
server: the pins stay the same, so a mirror cannot change a byte). Exit 0: the trees are in
place; 1: a download failed or did not match its pin (one line says which and what to do).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab.components import catalog, gittree  # noqa: E402

PINS = REPO / "tests" / "data" / "upstream.yaml"
VERSIONS = REPO / "manifests" / "versions.yaml"
FETCHED = REPO / ".cache" / "shared"  # the tests' last resort, filled by this script
MAX_BYTES = 64 << 20  # the largest archive accepted (kubeflow/pipelines is ~9 MB)
ARGO_REF = re.compile(r"https://github\.com/argoproj/argo-workflows/(manifests/[^?\s]+)\?ref=\S+")
FAILED = ".fetch-failed"  # in DEST/upstream: why the last fetch failed (the tests' skip reason)


class FetchError(Exception):
    """One line: what failed and what to do."""


def shared_root(repo: Path = REPO) -> tuple[Path, bool]:
    """(the folder whose upstream/ the tests read, whether it is this script's to fill)."""
    env = os.environ.get("KFLAB_SHARED")
    if env:
        return Path(env), False
    sibling = repo.parent / "shared"
    if (sibling / "upstream").is_dir():
        return sibling, False
    return repo / ".cache" / "shared", True


def load_pins(pins: Path = PINS, versions: Path = VERSIONS) -> dict[str, dict[str, Any]]:
    """Every tree with its url, commit and tree filled in (from versions.yaml by `artifact`)."""
    trees = yaml.safe_load(pins.read_text())["trees"]
    arts = yaml.safe_load(versions.read_text())["artifacts"]
    out = {}
    for folder, spec in trees.items():
        spec = dict(spec)
        if "artifact" in spec:
            art = arts[spec["artifact"]]
            spec.update(url=art["url"], commit=art["commit"], tree=art["tree"])
        for key in ("url", "commit", "tree", "keep", "tree_kept"):
            if not spec.get(key):
                raise FetchError(f"{pins}: trees.{folder}.{key} is missing: add it")
        out[folder] = spec
    return out


def download(url: str, out: Path) -> None:
    """URL (github.com, or the same path under $KFLAB_GITHUB_URL) into OUT, size-capped."""
    src = catalog.github_url() + url[len(catalog.GITHUB):] if url.startswith(
        catalog.GITHUB + "/") else url
    if not src.startswith(catalog.URL_OK):
        raise FetchError(f"refusing to download {src}: not https:// or loopback http")
    handlers: list[Any] = []
    if src.startswith("http://127.0.0.1"):
        handlers.append(urllib.request.ProxyHandler({}))  # loopback never goes via a proxy
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(src, headers={"User-Agent": "kflab-fetch-upstream"})  # noqa: S310 - scheme checked above
    total = 0
    try:
        with opener.open(req, timeout=60) as resp, out.open("wb") as fh:
            while chunk := resp.read(1 << 20):
                total += len(chunk)
                if total > MAX_BYTES:
                    raise FetchError(f"{src}: larger than {MAX_BYTES >> 20} MiB, refusing")
                fh.write(chunk)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"download failed: {src}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"download failed: {src}: {getattr(exc, 'reason', exc)} (no network? "
                         "set KFLAB_GITHUB_URL to a mirror, or KFLAB_SHARED to a copy)") from exc


def _kept(rel: str, spec: dict[str, Any]) -> str | None:
    """Where a file of the archive goes (relative to the folder), or None to leave it out."""
    if not any(rel == k or rel.startswith(k.rstrip("/") + "/") for k in spec["keep"]):
        return None
    if spec.get("suffixes") and not rel.endswith(tuple(spec["suffixes"])):
        return None
    move = spec.get("move")
    if move and (rel == move[0] or rel.startswith(move[0] + "/")):
        rel = move[1] + rel[len(move[0]):]
    return rel


def unpack(archive: Path, spec: dict[str, Any], dest: Path) -> int:
    """The kept files of a verified archive into DEST (mode 0644): how many. gittree has
    already refused anything git archive would not write (links out, `..`, two top folders)."""
    count = 0
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            parts = member.name.split("/", 1)
            if len(parts) < 2 or not member.isfile():
                continue  # the top folder, sub-folders (made below), symlinks (none kept)
            rel = _kept(parts[1], spec)
            if rel is None:
                continue
            path = dest / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None  # a regular file
            with src, path.open("wb") as fh:
                shutil.copyfileobj(src, fh)
            path.chmod(0o644)
            count += 1
    return count


def argo_local(folder: Path, argo_folder: str) -> int:
    """KFP's Argo kustomizations, pointed at the sibling folder ARGO_FOLDER: how many refs."""
    n = 0
    for path in sorted(folder.rglob("kustomization.yaml")):
        up = "../" * (len(path.relative_to(folder).parts))  # the kustomization's folder to root
        text, k = ARGO_REF.subn(lambda m, up=up: f"{up}{argo_folder}/{m.group(1)}",
                                path.read_text())
        if k:
            path.write_text(text)
            n += k
    return n


def fetch_tree(folder: str, spec: dict[str, Any], upstream: Path, print_trees: bool = False,
               say=print) -> str:
    """Download, verify and unpack one tree into UPSTREAM/FOLDER; its kept tree id."""
    final = upstream / folder
    stamp = upstream / f".{folder}.ok"
    if not print_trees and final.is_dir() and stamp.is_file() and \
            stamp.read_text().strip() == spec["tree_kept"]:
        return spec["tree_kept"]
    upstream.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=upstream, prefix=f".{folder}.") as tmp:
        archive = Path(tmp) / "archive.tar.gz"
        t = time.monotonic()
        download(spec["url"], archive)
        try:
            commit, tree = gittree.archive_ids(archive)
        except gittree.TreeError as exc:
            raise FetchError(f"{folder}: {exc}") from exc
        if (commit, tree) != (spec["commit"], spec["tree"]):
            raise FetchError(f"{folder}: {spec['url']} is commit {commit} tree {tree}, not the "
                             f"pinned {spec['commit']} tree {spec['tree']}: a wrong mirror or a "
                             "damaged download; nothing was unpacked")
        work = Path(tmp) / folder
        work.mkdir()
        count = unpack(archive, spec, work)
        refs = argo_local(work, spec["argo_local"]) if spec.get("argo_local") else 0
        kept = gittree.dir_tree(work)
        if print_trees:
            say(f"{folder}: tree_kept {kept}")
        elif kept != spec["tree_kept"]:
            raise FetchError(f"{folder}: the kept files have tree {kept}, not the pinned "
                             f"{spec['tree_kept']}: {PINS.relative_to(REPO)} and the code "
                             "disagree (see its header to move a pin)")
        stamp.unlink(missing_ok=True)
        if final.exists():
            shutil.rmtree(final)
        work.rename(final)
        stamp.write_text(kept + "\n")
    say(f"fetch_upstream: {folder}: {count} files, commit {commit[:12]} verified"
        f"{f', {refs} Argo references made local' if refs else ''} "
        f"({time.monotonic() - t:.1f} s)")
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", type=Path)
    parser.add_argument("--print-trees", action="store_true")
    args = parser.parse_args(argv)
    if args.dest:
        root = args.dest
    else:
        root, ours = shared_root()
        if not ours:
            print(f"fetch_upstream: using {root}/upstream (nothing to fetch)")
            return 0
    upstream = root / "upstream"
    try:
        pins = load_pins()
        for folder, spec in pins.items():
            fetch_tree(folder, spec, upstream, args.print_trees)
    except FetchError as exc:
        upstream.mkdir(parents=True, exist_ok=True)
        (upstream / FAILED).write_text(f"{exc}\n")
        print(f"fetch_upstream: {exc}", file=sys.stderr)
        return 1
    (upstream / FAILED).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
