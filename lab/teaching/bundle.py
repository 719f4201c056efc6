"""An offline bundle: everything `kflab up` downloads, fetched once and verified, for a class
with no network.

A bundle is a folder in the layout of the lab profile's `offline:` folder (the roles read
it: playbooks/roles/artifact, k3s/tasks/offline_images.yml), plus a manifest:

    k3s, k3s-airgap-images-ARCH.tar.zst, sha256sum-ARCH.txt   release files + checksum files
    kubeflow-manifests-26.03.tar.gz, argo-workflows-...tar.gz  git archives (commit + tree)
    nvidia-container-toolkit.gpg                               the apt key (fingerprint: role)
    images/NAME.tar                                            one OCI archive per image,
                                                               for linux/ARCH, named by its
                                                               normalised reference
    wheels/                                                    kflab and its locked deps,
                                                               requirements.txt (hashes)
    bundle.json                                                every file's sha256, each
                                                               image's reference, digest and
                                                               platform

Each download is verified as the roles verify it (release: the pinned sha256 AND the
release's checksum file; git: the pinned commit and tree) before it is kept; `verify` checks
every sha256 again before the bundle is used, and refuses a missing, changed or extra file.
Images are copied with skopeo (lab/teaching/skopeo.py), one OCI archive each, with the
manifest digest skopeo reports and the platform the image's config names.

What `verify` proves: the files are the ones bundle.json lists. bundle.json itself is only
as trustworthy as its source: `create` prints its sha256, and `verify --expect SHA256` (the
value the instructor wrote down) proves the whole bundle is the one they made; without it a
copy whose file and bundle.json were both changed still verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import __version__
from lab.digest import sha256_file
from lab.errors import LabError

MANIFEST = "bundle.json"
IMAGES, WHEELS = "images", "wheels"
REQUIREMENTS = "requirements.txt"  # in wheels/: every file pinned by name, version and hash
FORMAT = 2  # 2: normalised image references, each image's platform, the parts made
PARTS = ("artifacts", "images", "index", "wheels")  # what a bundle can hold (--only)
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
    """The archive's file name for a (normalised) image reference: readable, unique."""
    short = hashlib.sha256(image.encode()).hexdigest()[:8]
    return f"{_SAFE.sub('_', image)[:150]}-{short}.tar"


def fetch_image(image: str, dest: Path, arch: str, skopeo_exe: str = "skopeo") -> dict[str, str]:
    """Copy IMAGE for linux/ARCH into dest/images/ as an OCI archive named by its normalised
    reference; {file, digest, platform}."""
    from lab.components.reference import normalize
    from lab.teaching import skopeo

    ref = normalize(image)
    name = image_file(ref)
    digest, platform = skopeo.copy(ref, dest / IMAGES / name, arch, skopeo_exe)
    return {"file": f"{IMAGES}/{name}", "digest": digest, "platform": platform}


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
    write_requirements(out, files)


def _dist_of(path: Path) -> tuple[str, str] | None:
    """(normalised project name, version) of a wheel or source archive file."""
    from lab.backends.cluster.pipelines.index import dist_of

    return dist_of(path.name)


def write_requirements(out: Path, locks: list[Path]) -> Path:
    """wheels/requirements.txt: the lock files' entries as they are (name==version and
    every hash the lock allows), then each file of the wheelhouse the lock does not cover
    (kflab's own wheel, torch and what only torch needs) by name==version and the sha256 of
    that very file. So `pip install --no-index --find-links wheels --no-deps
    --require-hashes -r wheels/requirements.txt` installs nothing that was not pinned."""
    import re as _re

    from packaging.utils import canonicalize_name

    locked: set[str] = set()
    lines = ["# kflab's wheelhouse, pinned: generated by `kflab bundle create`; install with",
             "#   pip install --no-index --find-links wheels --no-deps --require-hashes "
             "-r wheels/requirements.txt", ""]
    for lock in locks:
        lines.append(f"# from {lock.parent.name}/{lock.name}")
        for line in lock.read_text().splitlines():
            m = _re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
            if m:
                locked.add(str(canonicalize_name(m.group(1))))
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line)
    extra = []
    for path in sorted(out.iterdir()):
        dist = _dist_of(path) if path.is_file() else None
        if dist is None or dist[0] in locked:
            continue
        extra.append(f"{dist[0]}=={dist[1]} --hash=sha256:{sha256_file(path)}")
    if extra:
        lines += ["", "# not in the lock: kflab itself, torch and what only torch needs "
                      "(the hash of the file here)", *extra]
    target = out / REQUIREMENTS
    target.write_text("\n".join(lines) + "\n")
    return target


def source_tree() -> Path | None:
    """The kflab checkout this code runs from, or None (an installed wheel)."""
    from lab.content import import_root

    root = import_root()
    return root if (root / "pyproject.toml").is_file() and (root / LOCKS).is_dir() else None


def create(dest: Path, *, arch: str, images: list[str], say: Say,
           source: Path | None = None, extras: str = "local",
           parts: tuple[str, ...] = PARTS, deps: bool = True,
           index_packages: list[str] | None = None,
           steps: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fetch and verify `parts` into `dest` (a new or empty folder); write bundle.json.

    The `index` part (the pipeline steps' package index, lab/teaching/pipindex.py) is an
    image layered on the bundle's python:3.11-slim: it needs the images part to hold it."""
    from lab.components.reference import normalize
    from lab.teaching import pipindex

    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise LabError(f"unknown bundle part(s): {', '.join(unknown) or 'none given'}",
                       hint=f"choose from: {', '.join(PARTS)}")
    refs: dict[str, list[str]] = {}
    for image in images if "images" in parts else []:
        refs.setdefault(normalize(image), []).append(image)  # bad references: before work
    src = None
    if "wheels" in parts:
        src = source or source_tree()
        if src is None:
            raise LabError("kflab is not running from a source checkout: no lock to build "
                           "the wheelhouse from",
                           hint="run it from a kflab checkout, or leave the wheels out "
                                "(--only artifacts,images)")
        lock_files(src, extras, this_platform())  # a wrong extra: before any download
    index_reqs: list[str] = []
    if "index" in parts:
        server = normalize(pipindex.SERVER_IMAGE)
        if server not in refs:
            raise LabError(f"the pipeline steps' package index is served by {server}, which "
                           "this bundle does not hold",
                           hint="bundle the images too (or list it in --images-file), or "
                                "leave the index out (--only artifacts,images,wheels); only a "
                                "wheelhouse: --only wheels")
        if steps is None:
            from lab.teaching.steps import shipped

            steps = shipped()
        index_reqs = sorted(set(steps.get("requirements") or []) | set(index_packages or []))
        pipindex.applicable(index_reqs, pipindex.Target(arch=arch))  # bad ones: before work
    if dest.exists() and any(dest.iterdir()):
        raise LabError(f"{dest} is not empty", hint="give a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    if "artifacts" in parts:
        say("artifacts (manifests/versions.yaml):")
        fetch_artifacts(dest, arch, say)
    pinned_images: dict[str, dict[str, Any]] = {}
    if refs:
        say(f"images ({len(refs)}, for linux/{arch}):")
    for ref, given in refs.items():
        say(f"  copy {ref}")
        pinned_images[ref] = {**fetch_image(ref, dest, arch), "listed_as": sorted(set(given))}
    index: dict[str, Any] | None = None
    if "index" in parts:
        from lab.backends.cluster.pipelines.compile import KFP_SERVER_VERSION

        server = normalize(pipindex.SERVER_IMAGE)
        target = pipindex.Target(python=pipindex.python_of(server), arch=arch)
        say(f"package index for the pipeline steps (Python {target.python}, linux/{arch}): "
            f"{', '.join(index_reqs)} and kfp=={KFP_SERVER_VERSION}")
        made = pipindex.make_image(dest / pinned_images[server]["file"], dest / IMAGES,
                                   index_reqs, KFP_SERVER_VERSION, target)
        index = made.record()
        pinned_images[made.image] = {"file": made.file, "digest": made.digest,
                                     "platform": f"linux/{arch}",
                                     "listed_as": ["the pipeline steps' package index"]}
        say(f"  {made.image}: {sum(len(v) for v in made.packages.values())} file(s) of "
            f"{len(made.packages)} package(s)")
    if src is not None:
        say("wheelhouse:")
        build_wheels(dest, src, extras, say, deps=deps)
    files = {str(p.relative_to(dest)): sha256_file(p) for p in sorted(dest.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    manifest = {"kind": "kflab-bundle", "format": FORMAT, "kflab": __version__, "arch": arch,
                "platform": f"linux/{arch}", "parts": [p for p in PARTS if p in parts],
                "files": files, "images": pinned_images}
    if index is not None:
        manifest["index"] = index
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def manifest_sha256(dest: Path) -> str:
    """The sha256 of bundle.json: what the instructor writes down and `verify --expect`
    checks (it covers every file's sha256, so it names the whole bundle)."""
    return sha256_file(dest / MANIFEST)


def _expected(expect: str) -> str:
    value = expect.strip().lower().removeprefix("sha256:")
    if not _SHA256.match(value):
        raise LabError(f"--expect {expect!r}: not a sha256 (64 hex digits)",
                       hint="give the `bundle.json sha256` that `kflab bundle create` "
                            "printed")
    return value


def verify(dest: Path, expect: str | None = None) -> dict[str, Any]:
    """Check every file against bundle.json (sha256), and that no file is missing or extra;
    with `expect`, first that bundle.json's own sha256 is that value; returns the manifest.
    Raises LabError naming the first file that differs.

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
        raw = path.read_bytes()
        if expect is not None:
            want = _expected(expect)
            got = hashlib.sha256(raw).hexdigest()
            if got != want:
                raise LabError(f"{path}: sha256 {got}, not the expected {want}",
                               hint="this is not the bundle that was made (or it was "
                                    "changed since): copy it again from its source")
        manifest = load_json(raw.decode("utf-8"), str(path))
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


def machine_arch() -> str:
    """This machine's architecture as images name it (amd64, arm64)."""
    import platform as pf

    machine = pf.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


def check_arch(manifest: dict[str, Any], where: Path, arch: str) -> None:
    """A bundle for another architecture cannot run here: one line naming the first part
    (the bundle, or an image) that is not for linux/ARCH."""
    made = manifest.get("arch")
    if made != arch:
        raise LabError(f"{where}: a bundle for {made or 'an unknown architecture'}, but the "
                       f"lab's machine is {arch}",
                       hint=f"make it with `kflab bundle create --arch {arch}`")
    images = manifest.get("images")
    for ref, info in sorted(images.items()) if isinstance(images, dict) else []:
        platform = info.get("platform") if isinstance(info, dict) else None
        if platform is None:
            raise LabError(f"{where}: {ref} has no recorded platform (a bundle of kflab "
                           f"{manifest.get('kflab', '?')}, format {manifest.get('format')})",
                           hint="make the bundle again with this kflab")
        if str(platform).split("/")[:2] != ["linux", arch]:
            raise LabError(f"{where}: {ref} is for {platform}, but the lab's machine is "
                           f"linux/{arch}",
                           hint=f"make it with `kflab bundle create --arch {arch}`")


def missing_images(manifest: dict[str, Any], gpu: bool = False) -> list[tuple[str, str]]:
    """(image, why) of the images the labs use that a bundle with images does not hold (none
    for a bundle made without its images part, e.g. `--only artifacts`)."""
    from lab.teaching.imageset import select

    if "images" not in (manifest.get("parts") or []):
        return []
    have = set(manifest.get("images") or {})
    return [(c.image, ", ".join(c.why)) for c in select(gpu=gpu) if c.image not in have]
