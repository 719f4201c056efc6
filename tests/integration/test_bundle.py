"""`kflab bundle create/verify` and an install from the bundle with no network at all.

REAL: skopeo (Debian's package) copying an image from Debian's docker-registry on 127.0.0.1
(an image the test writes as an OCI layout and pushes there with skopeo), the pins' checks
(sha256 + the release's checksum file, git commit + tree), the k3s role's offline install
(ansible-playbook, the role unchanged) run inside a new network namespace (`unshare -n`: no
interface but a downed loopback, so any connection attempt fails). STAND-IN: the bytes served
for GitHub (a k3s stand-in script, small git archives made here, a key file) on a loopback
artifact server, with a versions.yaml pinning them (KFLAB_VERSIONS_FILE), since GitHub cannot
be reached here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab.backends.local.procs import free_port
from lab.cli import cli
from tests.artifact_server import K3S_RELEASE, k3s_standin, serve, sha256, sums
from tests.gitrepo import archive, commit_all
from tests.integration.ansible_helpers import REPO, run_playbook
from tests.integration.test_k3s_download import ARCH, PLAY

pytestmark = pytest.mark.integration
STANDIN = k3s_standin()
AIRGAP = b"kflab test STAND-IN for the k3s airgap images\n"
KEY = b"kflab test STAND-IN for an apt key\n"


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt install skopeo docker-registry)")


def _blob(layout: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _image(layout: Path, arch: str) -> dict:
    """One platform's image (one layer: one text file naming the arch), its manifest's
    descriptor with the config and layer sizes a registry's manifest gives."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = f"hello from a kflab test image for {arch}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(body), 0
        tar.addfile(info, io.BytesIO(body))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps({"architecture": arch, "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [
                             f"sha256:{hashlib.sha256(raw.getvalue()).hexdigest()}"]}}).encode()
    config_desc, layer_desc = _blob(layout, config), _blob(layout, layer)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    **layer_desc}]}).encode()
    return {"mediaType": "application/vnd.oci.image.manifest.v1+json",
            **_blob(layout, manifest), "platform": {"os": "linux", "architecture": arch},
            "bytes": config_desc["size"] + layer_desc["size"]}


def oci_layout(layout: Path, tag: str, arches: tuple[str, ...]) -> dict[str, dict]:
    """An OCI image layout written by hand: one image per arch, under an image index when
    there are several (as multi-platform images are published); arch -> its descriptor."""
    images = {arch: _image(layout, arch) for arch in arches}
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    ref = {"annotations": {"org.opencontainers.image.ref.name": tag}}
    if len(arches) == 1:
        desc = {k: v for k, v in images[arches[0]].items() if k not in ("platform", "bytes")}
    else:
        index = json.dumps({"schemaVersion": 2,
                            "mediaType": "application/vnd.oci.image.index.v1+json",
                            "manifests": [{k: v for k, v in d.items() if k != "bytes"}
                                          for d in images.values()]}).encode()
        desc = {"mediaType": "application/vnd.oci.image.index.v1+json", **_blob(layout, index)}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2,
                                                   "manifests": [{**desc, **ref}]}))
    return images


def _push(layout: Path, tag: str, ref: str) -> None:
    subprocess.run(["skopeo", "copy", "--quiet", "--all", "--dest-tls-verify=false",
                    f"oci:{layout}:{tag}", f"docker://{ref}"], check=True, timeout=120)


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[dict]:
    """Debian's docker-registry on 127.0.0.1 holding images the test built: `hello` for
    amd64 and arm64 under one index (tags 1 and latest), `armonly:1` for arm64 only."""
    _need("skopeo", "docker-registry")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "error"},
        "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    proc = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("docker-registry did not start")
                time.sleep(0.2)
        host = f"127.0.0.1:{port}"
        hello = oci_layout(root / "hello", "1", ("amd64", "arm64"))
        _push(root / "hello", "1", f"{host}/kflab-test/hello:1")
        _push(root / "hello", "1", f"{host}/kflab-test/hello:latest")
        armonly = oci_layout(root / "armonly", "1", ("arm64",))
        _push(root / "armonly", "1", f"{host}/kflab-test/armonly:1")
        yield {"host": host, "image": f"{host}/kflab-test/hello:1", "hello": hello,
               "armonly": armonly}
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def github(tmp_path_factory) -> Iterator[dict]:
    """The loopback stand-in for GitHub and a versions.yaml pinning what it serves."""
    root = tmp_path_factory.mktemp("github")
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    arts = versions["artifacts"]
    with serve(root / "www") as srv:
        k3s = arts["k3s"]["arch"][ARCH]
        airgap = arts["k3s-airgap-images"]["arch"][ARCH]
        srv.put(f"{K3S_RELEASE}/{k3s['file']}", STANDIN)
        srv.put(f"{K3S_RELEASE}/{airgap['file']}", AIRGAP)
        srv.put(f"{K3S_RELEASE}/sha256sum-{ARCH}.txt",
                sums({k3s["file"]: sha256(STANDIN), airgap["file"]: sha256(AIRGAP)}))
        k3s["sha256"], airgap["sha256"] = sha256(STANDIN), sha256(AIRGAP)
        for name in [n for n, a in arts.items() if "tree" in a]:  # the git sources
            repo = root / name
            repo.mkdir()
            (repo / "README.md").write_text(f"kflab test STAND-IN for {name}\n")
            commit, tree = commit_all(repo)
            owner_repo = arts[name]["url"].split("github.com/")[1].split("/archive/")[0]
            archive(repo, f"{name}-{commit}", root / "a.tar.gz")
            srv.put(f"{owner_repo}/archive/{commit}.tar.gz", (root / "a.tar.gz").read_bytes())
            arts[name].update(url=f"https://github.com/{owner_repo}/archive/{commit}.tar.gz",
                              commit=commit, tree=tree)
        key = arts["nvidia-container-toolkit-key"]
        key["url"] = "https://github.com/kflab-test/keys/raw/main/gpgkey"
        srv.put("kflab-test/keys/raw/main/gpgkey", KEY)
        vfile = root / "versions.yaml"
        vfile.write_text(yaml.safe_dump(versions))
        yield {"server": srv, "versions": vfile, "root": root}


@pytest.fixture(scope="module")
def made(github, registry, tmp_path_factory) -> dict:
    """`kflab bundle create` run once (no wheelhouse: test_wheelhouse below). The images
    file names `hello` without a tag, as manifests often do: the bundle holds it under its
    normalised reference (`:latest`)."""
    out = tmp_path_factory.mktemp("bundle") / "b"
    images = out.parent / "images.txt"
    images.write_text(f"# the lab's images\n{registry['host']}/kflab-test/hello\n")
    env = {"KFLAB_VERSIONS_FILE": str(github["versions"]),
           "KFLAB_GITHUB_URL": github["server"].url}
    res = CliRunner().invoke(cli, ["bundle", "create", str(out), "--arch", ARCH,
                                   "--images-file", str(images), "--only",
                                   "artifacts,images"], env=env)
    assert res.exit_code == 0, res.output
    return {"dir": out, "output": res.output, "env": env,
            "image": f"{registry['host']}/kflab-test/hello:latest"}


def test_bundle_holds_every_pin_and_image_with_sha256s(made, github, registry):
    d = made["dir"]
    manifest = json.loads((d / "bundle.json").read_text())
    versions = yaml.safe_load(github["versions"].read_text())["artifacts"]
    want = {versions["k3s"]["arch"][ARCH]["file"], f"sha256sum-{ARCH}.txt",
            versions["k3s-airgap-images"]["arch"][ARCH]["file"],
            versions["kubeflow-manifests"]["file"], versions["argo-workflows"]["file"],
            versions["nvidia-container-toolkit-key"]["file"]}
    assert want <= set(manifest["files"])
    for rel, digest in manifest["files"].items():
        assert hashlib.sha256((d / rel).read_bytes()).hexdigest() == digest
    assert manifest["platform"] == f"linux/{ARCH}"
    assert manifest["parts"] == ["artifacts", "images"]
    image = manifest["images"][made["image"]]  # the normalised reference
    assert image["listed_as"] == [f"{registry['host']}/kflab-test/hello"]
    assert image["platform"] == f"linux/{ARCH}"
    own = registry["hello"][ARCH]["digest"]  # this arch's manifest, not the index
    assert image["digest"] == own
    with tarfile.open(d / image["file"]) as tar:  # an OCI archive naming the same manifest
        index = json.load(tar.extractfile("index.json"))
    assert index["manifests"][0]["digest"] == own
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == \
        made["image"]
    sha = hashlib.sha256((d / "bundle.json").read_bytes()).hexdigest()
    assert f"bundle.json sha256: {sha}" in made["output"]


def _create(args: list[str], github: dict) -> object:
    return CliRunner().invoke(cli, ["bundle", "create", *args],
                              env={"KFLAB_VERSIONS_FILE": str(github["versions"]),
                                   "KFLAB_GITHUB_URL": github["server"].url})


def test_images_are_copied_for_the_class_arch(registry, github, tmp_path):
    """--arch reaches skopeo (--override-os linux --override-arch): an arm64 class gets the
    arm64 image of a multi-platform tag on any build machine."""
    (tmp_path / "images.txt").write_text(registry["image"] + "\n")
    res = _create([str(tmp_path / "b"), "--arch", "arm64", "--only", "images",
                   "--images-file", str(tmp_path / "images.txt")], github)
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "b" / "bundle.json").read_text())
    image = manifest["images"][registry["image"]]
    assert image["platform"] == "linux/arm64"
    assert image["digest"] == registry["hello"]["arm64"]["digest"]
    from lab.teaching import oci

    assert oci.read_image(tmp_path / "b" / image["file"])[2]["architecture"] == "arm64"


def test_an_image_only_built_for_another_arch_is_refused(registry, github, tmp_path):
    ref = f"{registry['host']}/kflab-test/armonly:1"
    (tmp_path / "images.txt").write_text(ref + "\n")
    res = _create([str(tmp_path / "b"), "--arch", "amd64", "--only", "images",
                   "--images-file", str(tmp_path / "images.txt")], github)
    assert res.exit_code != 0
    assert str(res.exception).splitlines()[0] == \
        f"{ref}: the registry gave an image for linux/arm64, not linux/amd64"
    assert not list((tmp_path / "b").rglob("*.tar")) and \
        not (tmp_path / "b" / "bundle.json").exists()


def test_dry_run_prints_the_images_and_their_size(registry, github, tmp_path):
    missing = f"{registry['host']}/kflab-test/nothing:1"
    (tmp_path / "images.txt").write_text(f"{registry['image']}\n")
    res = _create([str(tmp_path / "b"), "--arch", "arm64", "--dry-run",
                   "--images-file", str(tmp_path / "images.txt")], github)
    assert res.exit_code == 0, res.output
    want = registry["hello"]["arm64"]["bytes"]
    line = next(x for x in res.output.splitlines() if x.startswith(registry["image"]))
    assert f"{want / 2**20:.1f} MiB" in line
    assert "1 image(s) for linux/arm64" in res.output
    assert not (tmp_path / "b").exists()  # nothing downloaded, nothing made
    (tmp_path / "images.txt").write_text(f"{registry['image']}\n{missing}\n")
    bad = _create([str(tmp_path / "b"), "--dry-run", "--images-file",
                   str(tmp_path / "images.txt")], github)
    assert bad.exit_code != 0 and "1 image(s) cannot be copied" in str(bad.exception)
    assert any(x.startswith(missing) for x in bad.output.splitlines())


def test_only_wheels_fetches_no_artifact(github, tmp_path, monkeypatch):
    """Issue 33: `--images-file /dev/null` ("only a wheelhouse") fetched every k3s artifact
    first. `--only wheels` asks the artifact server nothing. (The wheelhouse is built for
    real from this checkout, without its locked dependencies: deps=False keeps the test off
    the package index.)"""
    from lab.teaching import bundle

    real = bundle.build_wheels
    monkeypatch.setattr(bundle, "build_wheels",
                        lambda dest, src, extras, say, deps=True: real(dest, src, extras, say,
                                                                       deps=False))
    asked = len(github["server"].requests)
    (tmp_path / "none.txt").write_text("")  # an images file that names no image
    empty = _create([str(tmp_path / "e"), "--images-file", str(tmp_path / "none.txt")], github)
    assert empty.exit_code != 0 and "--only wheels" in str(empty.exception)
    assert len(github["server"].requests) == asked and not (tmp_path / "e").exists()
    res = _create([str(tmp_path / "b"), "--only", "wheels", "--extras", ""], github)
    assert res.exit_code == 0, res.output
    assert len(github["server"].requests) == asked
    manifest = json.loads((tmp_path / "b" / "bundle.json").read_text())
    assert manifest["parts"] == ["wheels"] and not manifest["images"]
    assert all(f.startswith("wheels/") for f in manifest["files"])


def test_verify_expect_catches_a_rewritten_bundle_json(made, tmp_path):
    """Issue 34: a changed file whose sha256 was recomputed in bundle.json passed verify.
    Plain verify still passes it (it proves only that the files match bundle.json); with
    --expect the sha256 the instructor wrote down, it fails."""
    sha = hashlib.sha256((made["dir"] / "bundle.json").read_bytes()).hexdigest()
    copy = tmp_path / "copy"
    shutil.copytree(made["dir"], copy)
    ok = CliRunner().invoke(cli, ["bundle", "verify", str(copy), "--expect", sha])
    assert ok.exit_code == 0 and "bundle.json is the expected one" in ok.output
    k3s = next(p for p in copy.iterdir() if p.name.startswith("k3s") and "airgap" not in p.name)
    k3s.write_bytes(k3s.read_bytes() + b"echo owned\n")
    manifest = json.loads((copy / "bundle.json").read_text())
    manifest["files"][k3s.name] = hashlib.sha256(k3s.read_bytes()).hexdigest()
    (copy / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
    plain = CliRunner().invoke(cli, ["bundle", "verify", str(copy)])
    assert plain.exit_code == 0  # what verify alone cannot see
    bad = CliRunner().invoke(cli, ["bundle", "verify", str(copy), "--expect", sha])
    assert bad.exit_code != 0
    got = hashlib.sha256((copy / "bundle.json").read_bytes()).hexdigest()
    assert str(bad.exception).splitlines()[0] == \
        f"{copy / 'bundle.json'}: sha256 {got}, not the expected {sha}"
    up = CliRunner().invoke(cli, ["--state", str(tmp_path / "state"), "up", "--provider",
                                  "host", "--bundle", str(copy), "--bundle-sha256", sha])
    assert up.exit_code != 0 and "not the expected" in str(up.exception)
    assert not (tmp_path / "state" / "labs").exists()


def test_verify_refuses_a_changed_missing_or_extra_file(made, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(made["dir"], copy)
    ok = CliRunner().invoke(cli, ["bundle", "verify", str(copy)])
    assert ok.exit_code == 0 and "files verified" in ok.output
    k3s = next(p for p in copy.iterdir() if p.name.startswith("k3s") and "airgap" not in p.name)
    k3s.write_bytes(k3s.read_bytes() + b"#")
    bad = CliRunner().invoke(cli, ["bundle", "verify", str(copy)])
    assert bad.exit_code != 0 and f"{k3s}: sha256" in str(bad.exception)
    k3s.unlink()
    assert "is missing" in str(CliRunner().invoke(cli, ["bundle", "verify", str(copy)])
                               .exception)
    shutil.copy(made["dir"] / k3s.name, k3s)
    (copy / "images" / "extra.tar").write_bytes(b"x")
    assert "is not in bundle.json" in str(CliRunner().invoke(cli, ["bundle", "verify",
                                                                   str(copy)]).exception)


def test_a_download_that_is_not_the_pin_is_not_kept(github, tmp_path):
    versions = yaml.safe_load(github["versions"].read_text())
    versions["artifacts"]["kubeflow-manifests"]["tree"] = "0" * 40
    vfile = tmp_path / "versions.yaml"
    vfile.write_text(yaml.safe_dump(versions))
    res = CliRunner().invoke(cli, ["bundle", "create", str(tmp_path / "b"), "--arch", ARCH,
                                   "--only", "artifacts"],
                             env={"KFLAB_VERSIONS_FILE": str(vfile),
                                  "KFLAB_GITHUB_URL": github["server"].url})
    assert res.exit_code != 0
    assert "kubeflow-manifests: archive has commit" in str(res.exception)
    assert not (tmp_path / "b" / versions["artifacts"]["kubeflow-manifests"]["file"]).exists()
    assert not (tmp_path / "b" / "bundle.json").exists()


def test_k3s_installs_from_the_bundle_with_no_network(made, github, tmp_path):
    """The k3s role's download step with the bundle as its offline folder, run by
    ansible-playbook inside `unshare -n`: no route to anything, the loopback artifact server
    unreachable (and asked nothing)."""
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here (unshare -n)")
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "bin").mkdir()
    asked = len(github["server"].requests)
    extra = {"kflab_versions_file": str(github["versions"]),
             "kflab_state_dir": str(tmp_path / "state"), "k3s_bin_dir": str(tmp_path / "bin"),
             "kflab_offline_dir": str(made["dir"]), "kflab_github_url": github["server"].url,
             "ansible_python_interpreter": sys.executable}
    from lab.teaching.bundle import verify

    verify(made["dir"])  # what `kflab up --bundle` does before the roles run
    result = run_playbook(tmp_path / "play.yml", "localhost,", extra, tmp_path,
                          prefix=("unshare", "-n"))
    assert result.rc == 0, result.output[-3000:]
    assert (tmp_path / "bin" / "k3s").read_bytes() == STANDIN
    assert len(github["server"].requests) == asked


def test_wheelhouse_is_built_against_the_lock(github, tmp_path, monkeypatch):
    """The wheelhouse step, wired as `bundle create` runs it: kflab's wheel from this checkout
    and the platform's lock files named. deps=False keeps this test off the package index (the
    locked dependencies are a `pip download --require-hashes` of the same files)."""
    from lab.teaching import bundle

    monkeypatch.setenv("KFLAB_VERSIONS_FILE", str(github["versions"]))
    monkeypatch.setenv("KFLAB_GITHUB_URL", github["server"].url)
    said: list[str] = []
    manifest = bundle.create(tmp_path / "b", arch=ARCH, images=[], say=said.append,
                             extras="", deps=False, parts=("artifacts", "images", "wheels"))
    wheels = [f for f in manifest["files"] if f.startswith("wheels/")]
    assert sorted(w.split("-")[0] for w in wheels) == ["wheels/kflab", "wheels/requirements.txt"]
    assert any(f"locked by locks/{bundle.this_platform()}/base.txt" in s for s in said), said
    bundle.verify(tmp_path / "b")


def test_up_refuses_a_bundle_for_another_arch(registry, github, tmp_path):
    """A bundle made for the other architecture fails at `up --bundle`, one line, before any
    role runs."""
    other = "arm64" if ARCH == "amd64" else "amd64"
    (tmp_path / "images.txt").write_text(registry["image"] + "\n")
    res = _create([str(tmp_path / "b"), "--arch", other, "--only", "images",
                   "--images-file", str(tmp_path / "images.txt")], github)
    assert res.exit_code == 0, res.output
    up = CliRunner().invoke(cli, ["--state", str(tmp_path / "state"), "up", "--provider",
                                  "host", "--bundle", str(tmp_path / "b")])
    assert up.exit_code != 0
    assert str(up.exception).splitlines()[0] == \
        f"{tmp_path / 'b'}: a bundle for {other}, but the lab's machine is {ARCH}"
    assert not (tmp_path / "state" / "labs").exists()


def test_up_refuses_a_bundle_missing_an_image_the_labs_use(made, tmp_path):
    """The bundle of this module holds one test image: `up --bundle` names the first image
    the labs use that it lacks, one line, before any role runs."""
    from lab.teaching.imageset import select

    first = select()[0]
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "state"), "up", "--provider",
                                   "host", "--bundle", str(made["dir"])])
    assert res.exit_code != 0
    line = str(res.exception).splitlines()[0]
    assert line.startswith(f"{made['dir']}: no image {first.image} (used as: ")
    assert "image(s) the labs use are missing" in line
    assert not (tmp_path / "state" / "labs").exists()


def test_up_refuses_a_changed_bundle_before_anything_runs(made, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(made["dir"], copy)
    image = next((copy / "images").iterdir())
    image.write_bytes(image.read_bytes()[:-1])
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "state"), "up", "--provider",
                                   "host", "--bundle", str(copy)])
    assert res.exit_code != 0
    assert f"{image}: sha256" in str(res.exception)
    assert not (tmp_path / "state" / "labs").exists()  # no lab was started


def test_the_wheelhouse_installs_with_require_hashes(tmp_path):
    """Issue 34: the class install used no --require-hashes. The wheelhouse now carries
    wheels/requirements.txt: the lock's entries with their hashes, and kflab's own wheel by
    the sha256 of that file; `pip install --no-index --find-links wheels --no-deps
    --require-hashes -r wheels/requirements.txt` installs it, and refuses a changed wheel.
    A small project stands in for kflab (its lock: one entry of kflab's own, six), so the
    test downloads one wheel from the package index instead of kflab's whole closure."""
    from lab.teaching import bundle

    src = tmp_path / "src"
    (src / "tinylab").mkdir(parents=True)
    (src / "tinylab" / "__init__.py").write_text("VALUE = 42\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinylab"\nversion = "1.0"\ndependencies = ["six"]\n'
        '[tool.setuptools]\npackages = ["tinylab"]\n')
    lock = (REPO / "locks" / bundle.this_platform() / "base.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lock) if line.startswith("six=="))
    entry = [lock[start]]
    for line in lock[start + 1:]:
        if not line.startswith("    --hash"):
            break
        entry.append(line)
    (src / "locks" / bundle.this_platform()).mkdir(parents=True)
    (src / "locks" / bundle.this_platform() / "base.txt").write_text("\n".join(entry) + "\n")
    dest = tmp_path / "b"
    dest.mkdir()
    bundle.build_wheels(dest, src, "", lambda _: None)
    wheels = dest / "wheels"
    reqs = (wheels / "requirements.txt").read_text()
    assert entry[0] in reqs and "--hash=sha256:" in reqs
    tiny = next(wheels.glob("tinylab-1.0-*.whl"))
    assert f"tinylab==1.0 --hash=sha256:{hashlib.sha256(tiny.read_bytes()).hexdigest()}" \
        in reqs
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    clean = {k: v for k, v in __import__("os").environ.items()
             if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": "/dev/null"}
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
               "--find-links", str(wheels), "--no-deps", "--require-hashes",
               "-r", str(wheels / "requirements.txt")]
    ok = subprocess.run(install, capture_output=True, text=True, timeout=300, env=clean)
    assert ok.returncode == 0, ok.stderr
    assert subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import tinylab, six; print(tinylab.VALUE)"],
                          capture_output=True, text=True, timeout=60).stdout.strip() == "42"
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q",
                    "tinylab"], check=True, timeout=120, env=clean)
    tiny.write_bytes(tiny.read_bytes() + b"\0")  # a wheel changed after the bundle was made
    bad = subprocess.run(install, capture_output=True, text=True, timeout=300, env=clean)
    assert bad.returncode != 0 and "DO NOT MATCH THE HASHES" in bad.stderr


def test_the_bundle_carries_the_pipeline_steps_index(registry, github, tmp_path,
                                                     monkeypatch):
    """`bundle create` with the index part: the steps' wheels (here six, and kfp 2.16.0)
    layered on the bundle's python image, recorded in bundle.json with its packages and
    served by the objects `up --bundle` applies. STAND-IN: Debian's python3 image
    (localhost/kflab-python:bookworm, scripts/standins/25-workload-images.sh), pushed to the
    loopback registry, for python:3.11-slim."""
    import os

    from tests.integration.conftest import CONF

    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    base = "localhost/kflab-python:bookworm"
    if shutil.which("podman") is None or subprocess.run(
            ["podman", "image", "exists", base], env=env).returncode != 0:
        pytest.skip(f"{base} not built (scripts/standins/25-workload-images.sh)")
    ref = f"{registry['host']}/library/python:3.11-slim"
    subprocess.run(["podman", "push", "-q", "--tls-verify=false", base, f"docker://{ref}"],
                   check=True, timeout=600, env=env)
    from lab.teaching import bundle, pipindex

    monkeypatch.setattr(pipindex, "SERVER_IMAGE", ref)
    manifest = bundle.create(tmp_path / "b", arch=ARCH, images=[ref], say=lambda _: None,
                             parts=("images", "index"), index_packages=["six"],
                             steps={"requirements": []})
    index = manifest["index"]
    assert set(index["packages"]) == {"six", "kfp"} and index["packages"]["kfp"] == ["2.16.0"]
    assert index["url"] == "http://kflab-pip-index.kubeflow.svc.cluster.local/simple/"
    image = manifest["images"][index["image"]]
    assert image["file"] == index["file"] and image["platform"] == f"linux/{ARCH}"
    from lab.teaching import oci

    _, _, config = oci.read_image(tmp_path / "b" / image["file"])
    assert len(config["rootfs"]["diff_ids"]) == len(oci.read_image(
        tmp_path / "b" / manifest["images"][ref]["file"])[2]["rootfs"]["diff_ids"]) + 1
    bundle.verify(tmp_path / "b")
    deployment = next(o for o in pipindex.objects(index) if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == index["image"]
