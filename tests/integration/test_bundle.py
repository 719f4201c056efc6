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


def oci_layout(layout: Path, tag: str) -> None:
    """A one-layer image (one text file) as an OCI image layout, written by hand."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = b"hello from a kflab test image\n"
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(body), 0
        tar.addfile(info, io.BytesIO(body))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [
                             f"sha256:{hashlib.sha256(raw.getvalue()).hexdigest()}"]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   **_blob(layout, config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    **_blob(layout, layer)}]}).encode()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", **_blob(layout, manifest),
         "annotations": {"org.opencontainers.image.ref.name": tag}}]}))


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[str]:
    """Debian's docker-registry on 127.0.0.1, holding one image the test built: its ref."""
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
        oci_layout(root / "layout", "1")
        ref = f"127.0.0.1:{port}/kflab-test/hello:1"
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false",
                        f"oci:{root / 'layout'}:1", f"docker://{ref}"], check=True,
                       timeout=120)
        yield ref
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
    """`kflab bundle create` run once (no wheelhouse: test_wheelhouse below)."""
    out = tmp_path_factory.mktemp("bundle") / "b"
    images = out.parent / "images.txt"
    images.write_text(f"# the lab's images\n{registry}\n")
    env = {"KFLAB_VERSIONS_FILE": str(github["versions"]),
           "KFLAB_GITHUB_URL": github["server"].url}
    res = CliRunner().invoke(cli, ["bundle", "create", str(out), "--arch", ARCH,
                                   "--images-file", str(images), "--no-wheels"], env=env)
    assert res.exit_code == 0, res.output
    return {"dir": out, "output": res.output, "env": env, "image": registry}


def test_bundle_holds_every_pin_and_image_with_sha256s(made, github):
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
    image = manifest["images"][made["image"]]
    inspect = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--format",
                              "{{.Digest}}", f"docker://{made['image']}"], check=True,
                             capture_output=True, text=True, timeout=60).stdout.strip()
    assert image["digest"] == inspect
    with tarfile.open(d / image["file"]) as tar:  # an OCI archive naming the same manifest
        index = json.load(tar.extractfile("index.json"))
    assert index["manifests"][0]["digest"] == inspect
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == \
        made["image"]


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
                                   "--no-wheels"],
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
                             extras="", deps=False)
    wheels = [f for f in manifest["files"] if f.startswith("wheels/")]
    assert len(wheels) == 1 and wheels[0].startswith("wheels/kflab-")
    assert any(f"locked by locks/{bundle.this_platform()}/base.txt" in s for s in said), said
    bundle.verify(tmp_path / "b")


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
