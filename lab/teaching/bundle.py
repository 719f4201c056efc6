"""An offline bundle: everything `kflab up` downloads, fetched once and verified, for a class
with no network.

A bundle is a folder in the layout of the lab profile's `offline:` folder (the roles read
it: playbooks/roles/artifact, k3s/tasks/offline_images.yml), plus a manifest:

    k3s, k3s-airgap-images-ARCH.tar.zst, sha256sum-ARCH.txt   release files + checksum files
    kubeflow-manifests-26.03.tar.gz, argo-workflows-...tar.gz  git archives (commit + tree)
    nvidia-container-toolkit.gpg                               the apt key (fingerprint: role)
    images/NAME.tar                                            one OCI archive per image
    wheels/                                                    kflab and its locked deps
    bundle.json                                                every file's sha256, each
                                                               image's reference and digest

Each download is verified as the roles verify it (release: the pinned sha256 AND the
release's checksum file; git: the pinned commit and tree) before it is kept; `verify` checks
every sha256 again before the bundle is used, and refuses a missing, changed or extra file.
Images are copied with skopeo (a registry client made for it), one OCI archive each, with
the manifest digest skopeo reports.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import __version__
from lab.digest import sha256_file
from lab.errors import LabError

MANIFEST = "bundle.json"
IMAGES, WHEELS = "images", "wheels"
FORMAT = 1
# The lock the wheelhouse is built from (scripts/lock.py writes it): locks/<platform>/<group>.txt.
LOCKS = "locks"
Say = Callable[[str], None]
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_MANIFEST = 64 * 1024 * 1024  # bundle.json lists a few thousand files: ~1 MB


def _download(url: str, dest: Path) -> str:
    """Download to `dest` (via a temp file); returns its sha256."""
    from lab.components.pin import _chunks

    tmp = dest.with_name(f".{dest.name}.part")
    h = hashlib.sha256()
    with open(tmp, "wb") as fh:
        for chunk in _chunks(url):
            h.update(chunk)
            fh.write(chunk)
    os.replace(tmp, dest)
    return h.hexdigest()


def fetch_artifacts(dest: Path, arch: str, say: Say) -> list[str]:
    """Every pinned artifact of versions.yaml for `arch`, verified; returns the file names."""
    from lab.components import catalog, gittree
    from lab.components.pin import Sources, parse_sums

    src = Sources.from_env()
    cat = catalog.load()
    files: list[str] = []
    for name, art in cat.artifacts.items():
        if art.kind == "release":
            rel = art.arch.get(arch)
            if rel is None:
                raise LabError(f"artifacts.{name} has no pin for {arch}",
                               hint=f"pins exist for {', '.join(art.arch)}")
            sums_name = Path(rel.checksums.split("?")[0]).name
            if sums_name not in files:
                say(f"  fetch {rel.checksums}")
                _download(src.mirror(rel.checksums), dest / sums_name)
                files.append(sums_name)
            listed = parse_sums((dest / sums_name).read_text(errors="replace"))
            say(f"  fetch {rel.url}")
            got = _download(src.mirror(rel.url), dest / rel.file)
            if got != rel.sha256 or listed.get(rel.file) != rel.sha256:
                (dest / rel.file).unlink()
                raise LabError(f"{name} ({arch}): downloaded sha256 {got}; pinned "
                               f"{rel.sha256}; {sums_name} lists "
                               f"{listed.get(rel.file) or 'nothing'} for {rel.file}",
                               hint="the download, the pin and the release's checksum file "
                                    "must agree: nothing kept")
            files.append(rel.file)
        elif art.kind == "git":
            say(f"  fetch {art.url}")
            _download(src.mirror(art.url), dest / art.file)
            commit, tree = gittree.archive_ids(dest / art.file)
            if (commit, tree) != (art.commit, art.tree):
                (dest / art.file).unlink()
                raise LabError(f"{name}: archive has commit {commit} tree {tree}; pinned "
                               f"commit {art.commit} tree {art.tree}",
                               hint="the download is not the pinned source: nothing kept")
            files.append(art.file)
        else:  # openpgp-key: its fingerprint is checked by the role with gpg, on use
            say(f"  fetch {art.url}")
            _download(src.mirror(art.url), dest / art.file)
            files.append(art.file)
    return files


def image_file(image: str) -> str:
    """The archive's file name for an image reference (readable, unique per reference)."""
    short = hashlib.sha256(image.encode()).hexdigest()[:8]
    return f"{_SAFE.sub('_', image)[:150]}-{short}.tar"


def _loopback(image: str) -> bool:
    return image.startswith(("127.0.0.1:", "localhost:"))


def fetch_image(image: str, dest: Path, skopeo: str = "skopeo") -> tuple[str, str]:
    """skopeo copy docker://IMAGE -> an OCI archive named for IMAGE; (file, digest)."""
    from lab.components.catalog import IMAGE_RE

    if not IMAGE_RE.match(image):
        raise LabError(f"not an image reference: {image!r}",
                       hint="one reference per line, as `kflab components images` prints")
    if shutil.which(skopeo) is None:
        raise LabError("skopeo is not installed: it copies the images",
                       hint="install it (Debian/Ubuntu: apt install skopeo)")
    name = image_file(image)
    target = dest / IMAGES / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        digest_file = Path(tmp) / "digest"
        argv = [skopeo, "copy", "--quiet", "--digestfile", str(digest_file)]
        if _loopback(image):  # a registry on this machine speaks plain http
            argv.append("--src-tls-verify=false")
        ref = image.split("@")[0]
        argv += [f"docker://{image}", f"oci-archive:{target}:{ref}"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise LabError(f"skopeo could not copy {image}: "
                           f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}",
                           hint="check the name and that this machine reaches the registry")
        digest = digest_file.read_text().strip()
    return f"{IMAGES}/{name}", digest


def lock_files(source: Path, extras: str, platform: str) -> list[Path]:
    """The lock files of `platform` for kflab's core and `extras` (comma-separated)."""
    folder = source / LOCKS / platform
    if not folder.is_dir():
        known = sorted(p.name for p in (source / LOCKS).iterdir() if p.is_dir()) \
            if (source / LOCKS).is_dir() else []
        raise LabError(f"no lock for platform {platform!r} in {source / LOCKS}",
                       hint=f"use one of: {', '.join(known) or 'none (not a kflab checkout)'}")
    files = [folder / "base.txt"]
    for extra in filter(None, (e.strip() for e in extras.split(","))):
        path = folder / f"{extra}.txt"
        if not path.is_file():
            raise LabError(f"no lock for the extra {extra!r} ({path})",
                           hint="the extras are: " + ", ".join(
                               sorted(p.stem for p in folder.glob("*.txt") if p.stem != "base")))
        files.append(path)
    return files


def this_platform() -> str:
    """The lock folder name of this machine (as scripts/install_locked.py names it)."""
    import platform as pf

    machine = pf.machine().lower()
    machine = {"amd64": "x86_64",
               "arm64": "arm64" if sys.platform == "darwin" else "aarch64"}.get(machine, machine)
    system = "macos" if sys.platform == "darwin" else sys.platform
    return f"{system}-{machine}"


def build_wheels(dest: Path, source: Path, extras: str, say: Say, *,
                 deps: bool = True) -> None:
    """kflab's own wheel (built from its checkout, no build isolation: setuptools is locked)
    and, with `deps`, every locked dependency of `extras` for this platform, downloaded with
    the lock's hashes (`pip download --no-deps --require-hashes`): what students install with
    `pip install --no-index --find-links wheels --no-deps -r <the same lock files>`. torch is
    not in the lock (a GPU user keeps their own): the wheelhouse takes [tool.kflab] torch."""
    files = lock_files(source, extras, this_platform())
    out = dest / WHEELS
    steps = [[sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
              "--no-build-isolation", "-w", str(out), str(source)]]
    if deps:
        # Wheels where the package has them for this platform, else its source archive (the
        # hash the lock holds): kfp-server-api, for one, is published as an sdist only, and
        # pip builds it offline on the student's laptop with the locked setuptools that the
        # wheelhouse also holds (--only-binary=:all: failed the whole step on it).
        steps.append([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                      "--require-hashes", "-d", str(out),
                      *[a for f in files for a in ("-r", str(f))]])
        if "local" in extras.split(","):
            import tomllib

            torch = tomllib.loads((source / "pyproject.toml").read_text()).get(
                "tool", {}).get("kflab", {}).get("torch")
            if torch:  # with its own dependencies: a CUDA build needs its nvidia-* wheels
                steps.append([sys.executable, "-m", "pip", "download", "--quiet",
                              "-d", str(out), f"torch=={torch}"])
    say(f"  wheels of kflab{f'[{extras}]' if extras else ''}, locked by "
        + ", ".join(str(f.relative_to(source)) for f in files)
        + ("" if deps else " (kflab only)"))
    for argv in steps:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise LabError("pip could not build the wheelhouse: "
                           f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}",
                           hint="this step needs the package index")


def source_tree() -> Path | None:
    """The kflab checkout this code runs from, or None (an installed wheel)."""
    from lab.content import import_root

    root = import_root()
    return root if (root / "pyproject.toml").is_file() and (root / LOCKS).is_dir() else None


def create(dest: Path, *, arch: str, images: list[str], say: Say,
           source: Path | None = None, extras: str = "local",
           wheels: bool = True, deps: bool = True) -> dict[str, Any]:
    """Fetch and verify everything into `dest` (a new or empty folder); write bundle.json."""
    if dest.exists() and any(dest.iterdir()):
        raise LabError(f"{dest} is not empty", hint="give a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    say("artifacts (manifests/versions.yaml):")
    fetch_artifacts(dest, arch, say)
    pinned_images: dict[str, dict[str, str]] = {}
    if images:
        say(f"images ({len(images)}):")
    for image in dict.fromkeys(images):
        say(f"  copy {image}")
        file, digest = fetch_image(image, dest)
        pinned_images[image] = {"file": file, "digest": digest}
    if wheels:
        say("wheelhouse:")
        src = source or source_tree()
        if src is None:
            raise LabError("kflab is not running from a source checkout: no lock to build "
                           "the wheelhouse from", hint="run it from a kflab checkout, or "
                                                       "pass --no-wheels")
        build_wheels(dest, src, extras, say, deps=deps)
    files = {str(p.relative_to(dest)): sha256_file(p) for p in sorted(dest.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    manifest = {"kind": "kflab-bundle", "format": FORMAT, "kflab": __version__, "arch": arch,
                "files": files, "images": pinned_images}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def verify(dest: Path) -> dict[str, Any]:
    """Check every file against bundle.json (sha256), and that no file is missing or extra;
    returns the manifest. Raises LabError naming the first file that differs.

    The bundle is hostile input (copied from a USB stick or a share): a manifest path that
    leaves the folder, a symlink (the roles would follow it out of the bundle) or anything
    that is not a regular file is refused before a byte of it is read."""
    from lab.errors import InputError
    from lab.yamlio import load_json

    path = dest / MANIFEST
    if not dest.is_dir():
        raise LabError(f"{dest}: not a folder", hint="give the folder `kflab bundle create` "
                                                     "made")
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):  # a symlink to /dev/zero, a FIFO: never read
            raise LabError(f"{path}: not a plain file", hint="copy the bundle again")
        if info.st_size > MAX_MANIFEST:
            raise LabError(f"{path}: {info.st_size} bytes; a bundle manifest is at most "
                           f"{MAX_MANIFEST}", hint="copy the bundle again")
        manifest = load_json(path.read_bytes().decode("utf-8"), str(path))
    except FileNotFoundError:
        raise LabError(f"{dest}: no {MANIFEST}: not a kflab bundle",
                       hint="make one with `kflab bundle create DIR`") from None
    except (InputError, LabError):
        raise
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: unreadable ({exc})", hint="copy the bundle again") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != "kflab-bundle" or \
            not isinstance(manifest.get("files"), dict):
        raise LabError(f"{path}: not a kflab bundle manifest", hint="copy the bundle again")
    listed: dict[str, str] = manifest["files"]
    for rel, want in sorted(listed.items()):
        parts = Path(rel).parts
        if not rel or ".." in parts or Path(rel).is_absolute() or "\\" in rel or \
                "\0" in rel or rel == MANIFEST:
            raise LabError(f"{path}: files: refusing the path {rel!r}",
                           hint="a bundle lists only relative paths inside it: copy the "
                                "bundle again")
        if not isinstance(want, str) or not _SHA256.match(want):
            raise LabError(f"{path}: files.{rel}: {want!r} is not a sha256",
                           hint="copy the bundle again")
    present = set()
    for root, dirs, files in os.walk(dest):  # os.walk does not follow symlinked folders
        for name in dirs + files:
            full = Path(root) / name
            rel = str(full.relative_to(dest))
            if full.is_symlink():
                raise LabError(f"{full}: a symlink (to {os.readlink(full)}) inside the bundle",
                               hint="a bundle holds plain files only: copy it again "
                                    "(cp -rL, or the original archive)")
            if name in files and rel != MANIFEST:
                if not full.is_file():
                    raise LabError(f"{full}: not a regular file",
                                   hint="remove it, or make the bundle again")
                present.add(rel)
    for rel in sorted(set(listed) - present):
        raise LabError(f"{dest}: {rel} is missing", hint="copy the bundle again")
    for rel in sorted(present - set(listed)):
        raise LabError(f"{dest}: {rel} is not in {MANIFEST}",
                       hint="remove it, or make the bundle again")
    for rel, want in sorted(listed.items()):
        try:
            got = sha256_file(dest / rel)
        except OSError as exc:
            raise LabError(f"{dest / rel}: cannot read it ({exc.strerror or exc})",
                           hint="copy the bundle again") from None
        if got != want:
            raise LabError(f"{dest / rel}: sha256 {got}, but {MANIFEST} says {want}",
                           hint="the file changed since the bundle was made: copy it again")
    return manifest
