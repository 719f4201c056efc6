"""`kflab components pin` (lab/components/pin.py) against a loopback server (127.0.0.1, a free
port) standing in for github.com and api.github.com. STAND-INS: every served file — release
assets and checksum files made here, source archives made by `git archive` of repositories
built here, API answers written from what git itself reports for them. REAL: the pin code,
its downloads over http, the tree hashing and the rewrite of a copy of manifests/versions.yaml.
Expected values are computed independently (hashlib, git rev-parse), never by the code under
test."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from lab.components import catalog
from lab.components.pin import PinMismatch, Sources, pin
from lab.errors import InputError, LabError
from tests.artifact_server import ArtifactServer, serve, sha256, sums
from tests.conftest import REPO
from tests.gitrepo import archive, commit_all, git

K3S_NEW = "v1.99.0+k3s1"
ASSETS = {"amd64": ["k3s", "k3s-airgap-images-amd64.tar.zst"],
          "arm64": ["k3s-arm64", "k3s-airgap-images-arm64.tar.zst"]}


def standin_asset(name: str) -> bytes:
    return f"kflab test STAND-IN for {name} {K3S_NEW}\n".encode()


def publish_k3s(srv: ArtifactServer, wrong: str | None = None) -> dict[str, str]:
    """A stand-in k3s release at K3S_NEW; WRONG: an asset whose listed sha256 is wrong."""
    shas = {}
    for arch, names in ASSETS.items():
        listed = {}
        for name in names:
            data = standin_asset(name)
            srv.put(f"k3s-io/k3s/releases/download/{K3S_NEW}/{name}", data)
            shas[name] = sha256(data)
            listed[name] = "0" * 64 if name == wrong else shas[name]
        srv.put(f"k3s-io/k3s/releases/download/{K3S_NEW}/sha256sum-{arch}.txt", sums(listed))
    return shas


def publish_git(srv: ArtifactServer, tmp: Path, owner_repo: str, tag: str, *,
                annotated: bool = False, api_tree: str | None = None) -> tuple[str, str]:
    """A stand-in repository with a CRLF README, tagged TAG, served as GitHub would."""
    repo = tmp / owner_repo.replace("/", "_")
    repo.mkdir(parents=True)
    (repo / "README.md").write_bytes(b"# stand-in\r\nstored with CRLF\r\n")
    (repo / "manifests" / "base").mkdir(parents=True)
    (repo / "manifests" / "base" / "kustomization.yaml").write_text("resources: []\n")
    (repo / "hack.sh").write_text("#!/bin/sh\n")
    (repo / "hack.sh").chmod(0o755)
    commit, tree = commit_all(repo)
    if annotated:
        git(repo, "tag", "-a", "-m", "release", tag)
    else:
        git(repo, "tag", tag)
    srv.put(f"{owner_repo}/archive/refs/tags/{tag}.tar.gz",
            archive(repo, f"x-{tag}", tmp / "tag.tar.gz").read_bytes())
    srv.put(f"{owner_repo}/archive/{commit}.tar.gz",
            archive(repo, f"x-{commit}", tmp / "commit.tar.gz").read_bytes())
    api = f"api/repos/{owner_repo}/git"
    if annotated:
        tag_sha = git(repo, "rev-parse", f"refs/tags/{tag}")
        srv.put_json(f"{api}/ref/tags/{tag}", {"object": {"type": "tag", "sha": tag_sha}})
        srv.put_json(f"{api}/tags/{tag_sha}", {"object": {"type": "commit", "sha": commit}})
    else:
        srv.put_json(f"{api}/ref/tags/{tag}", {"object": {"type": "commit", "sha": commit}})
    srv.put_json(f"{api}/commits/{commit}", {"sha": commit, "tree": {"sha": api_tree or tree}})
    return commit, tree


@pytest.fixture
def srv(tmp_path: Path):
    with serve(tmp_path / "www") as server:
        yield server


@pytest.fixture
def vfile(tmp_path: Path) -> Path:
    path = tmp_path / "versions.yaml"
    shutil.copy(REPO / "manifests" / "versions.yaml", path)
    return path


def sources(srv: ArtifactServer) -> Sources:
    return Sources(github=srv.url, api=f"{srv.url}/api")


def comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("#")]


def test_moves_every_value_keeps_the_layout_and_round_trips(srv, vfile, tmp_path):
    shas = publish_k3s(srv)
    kf = publish_git(srv, tmp_path / "kf", "kubeflow/manifests", "99.01")
    argo = publish_git(srv, tmp_path / "argo", "argoproj/argo-workflows", "v9.9.9",
                       annotated=True)
    jobset = publish_git(srv, tmp_path / "jobset", "kubernetes-sigs/jobset", "v0.99.0")
    before = vfile.read_text()
    lines: list[str] = []
    plan = pin(vfile, ["k3s=" + K3S_NEW, "kubeflow-manifests=99.01", "argo-workflows=v9.9.9",
                       "jobset=v0.99.0"], sources(srv), lines.append)
    after = vfile.read_text()
    cat = catalog.load(vfile)
    rel = f"https://github.com/k3s-io/k3s/releases/download/{K3S_NEW.replace('+', '%2B')}"
    for art in ("k3s", "k3s-airgap-images"):  # the airgap images follow k3s' release
        assert cat.artifacts[art].version == K3S_NEW
    for arch, names in ASSETS.items():
        k3s_file, airgap = names
        assert cat.artifacts["k3s"].arch[arch].sha256 == shas[k3s_file]
        assert cat.artifacts["k3s"].arch[arch].url == f"{rel}/{k3s_file}"
        assert cat.artifacts["k3s"].arch[arch].checksums == f"{rel}/sha256sum-{arch}.txt"
        assert cat.artifacts["k3s-airgap-images"].arch[arch].sha256 == shas[airgap]
    m = cat.artifacts["kubeflow-manifests"]
    assert (m.version, m.commit, m.tree) == ("99.01", *kf)
    assert m.url == f"https://github.com/kubeflow/manifests/archive/{kf[0]}.tar.gz"
    assert m.file == "kubeflow-manifests-99.01.tar.gz"
    a = cat.artifacts["argo-workflows"]
    assert (a.version, a.commit, a.tree) == ("v9.9.9", *argo)
    j = cat.artifacts["jobset"]
    assert (j.version, j.commit, j.tree) == ("v0.99.0", *jobset)
    # Layout: every comment line kept, everything outside `artifacts:` byte-identical, and
    # the version that looks like a number stays a string.
    assert comments(after) == comments(before)
    assert after[after.index("\npackages:"):] == before[before.index("\npackages:"):]
    assert after[:after.index("artifacts:")] == before[:before.index("artifacts:")]
    assert 'version: "99.01"' in after
    assert len(after.splitlines()) == len(before.splitlines())
    assert any("lists" in line or "listed" in line for line in lines)
    assert {c.artifact for c in plan.changed} == {"k3s", "k3s-airgap-images",
                                                  "kubeflow-manifests", "argo-workflows",
                                                  "jobset"}
    # Round trip: pinning again at the pinned versions computes the same values and leaves
    # the file byte for byte as it is.
    again = pin(vfile, [], sources(srv), lambda _: None)
    assert again.changed == [] and vfile.read_text() == after


def publish_all(srv, tmp_path, **git_kw) -> None:
    publish_k3s(srv)
    publish_git(srv, tmp_path / "kf", "kubeflow/manifests", "99.01", **git_kw)


@pytest.mark.parametrize("case, message", [
    ("sha", "downloaded with sha256"),
    ("tree", "the archive's content has tree"),
    ("missing", "HTTP 404"),
])
def test_a_disagreement_refuses_and_writes_nothing(srv, vfile, tmp_path, case, message):
    if case == "sha":
        publish_k3s(srv, wrong="k3s-airgap-images-arm64.tar.zst")
        specs = ["k3s=" + K3S_NEW]
    elif case == "tree":  # the API says the commit has another tree (e.g. export-ignore)
        publish_git(srv, tmp_path / "kf", "kubeflow/manifests", "99.01", api_tree="1" * 40)
        specs = ["kubeflow-manifests=99.01"]
    else:
        specs = ["k3s=v1.98.0+k3s1"]  # nothing published at that version
    before = vfile.read_bytes()
    with pytest.raises(LabError, match=message) as err:
        pin(vfile, specs, sources(srv), lambda _: None)
    if case != "missing":
        assert isinstance(err.value, PinMismatch) and "nothing was written" in str(err.value)
    if case == "sha":  # both values named
        assert "0" * 64 in str(err.value)
        assert sha256(standin_asset("k3s-airgap-images-arm64.tar.zst")) in str(err.value)
    assert vfile.read_bytes() == before
    assert [p.name for p in vfile.parent.glob(".versions.yaml.*")] == []


def test_tag_archive_of_another_commit_is_refused(srv, vfile, tmp_path):
    commit, _ = publish_git(srv, tmp_path / "kf", "kubeflow/manifests", "99.01")
    srv.put_json("api/repos/kubeflow/manifests/git/ref/tags/99.01",
                 {"object": {"type": "commit", "sha": "2" * 40}})
    before = vfile.read_bytes()
    with pytest.raises(PinMismatch, match=f"the tag archive is commit {commit}, but the tag "
                       f"points at {'2' * 40}"):
        pin(vfile, ["kubeflow-manifests=99.01"], sources(srv), lambda _: None)
    assert vfile.read_bytes() == before


def test_dry_run_computes_but_does_not_write(srv, vfile, tmp_path):
    publish_all(srv, tmp_path)
    before = vfile.read_bytes()
    plan = pin(vfile, ["kubeflow-manifests=99.01"], sources(srv), lambda _: None, dry_run=True)
    assert any(c.path == ("tree",) for c in plan.changed)
    assert vfile.read_bytes() == before


@pytest.mark.parametrize("spec, problem", [
    ("nope=1", "no such artifact"),
    ("nvidia-container-toolkit-key=2", "set by hand"),
    ("k3s=v1/../../x", "not a version"),
    ("k3s=$(id)", "not a version"),
])
def test_bad_requests_are_input_errors_before_any_download(srv, vfile, spec, problem):
    with pytest.raises(InputError, match=re.escape(problem)):
        pin(vfile, [spec], sources(srv), lambda _: None)
    assert srv.requests == []


def test_one_release_moves_together(srv, vfile):
    with pytest.raises(InputError, match="move together"):
        pin(vfile, ["k3s=" + K3S_NEW, "k3s-airgap-images=v1.98.0+k3s1"], sources(srv),
            lambda _: None)
    assert srv.requests == []


def test_non_tls_sources_are_refused(monkeypatch):
    monkeypatch.setenv("KFLAB_GITHUB_URL", "http://mirror.example")
    with pytest.raises(InputError, match="KFLAB_GITHUB_URL"):
        Sources.from_env()
    monkeypatch.setenv("KFLAB_GITHUB_URL", "https://mirror.example/gh/")
    monkeypatch.setenv("KFLAB_GITHUB_API_URL", "http://api.example")
    with pytest.raises(InputError, match="KFLAB_GITHUB_API_URL"):
        Sources.from_env()
    monkeypatch.delenv("KFLAB_GITHUB_API_URL")
    src = Sources.from_env()
    assert src.mirror("https://github.com/o/r/archive/x.tar.gz") == \
        "https://mirror.example/gh/o/r/archive/x.tar.gz"
    assert Sources().github == "https://github.com" and Sources().api == "https://api.github.com"


def test_the_real_pins_are_complete_and_as_published():
    """The values issue 11 quotes (k3s sha256sum files, the upstream repositories, NVIDIA's
    key), all present: no pin is null anywhere in manifests/versions.yaml."""
    doc = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())

    def nulls(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from nulls(v, f"{path}.{k}")
        elif node is None:
            yield path
    assert list(nulls(doc["artifacts"])) == []
    cat = catalog.load(REPO / "manifests" / "versions.yaml")
    assert all(a.pinned for a in cat.artifacts.values())
    k3s, airgap = cat.artifacts["k3s"], cat.artifacts["k3s-airgap-images"]
    assert k3s.version == airgap.version == "v1.34.2+k3s1"
    assert k3s.arch["amd64"].sha256 == \
        "15811d34187e03fe29d0e46108c42cc33e62cec1b3d9d80f50944536ebcad40a"
    assert k3s.arch["arm64"].sha256 == \
        "2e1db0e54a8b0d0ab8a264a119c9c617561f9290e7bb2722d795f8bc91b24cf8"
    assert airgap.arch["amd64"].sha256 == \
        "24359781bd775f513691e98031853d79eac53e265f7d72d1e7325df4f3b18eb0"
    assert airgap.arch["arm64"].sha256 == \
        "41b34aab92bc5166135dc73217ead65766688fd3543166ce32ffff7e101bef46"
    for arch, f in k3s.arch.items():
        assert f.checksums.endswith(f"/v1.34.2%2Bk3s1/sha256sum-{arch}.txt")
        assert airgap.arch[arch].checksums == f.checksums
    m, a = cat.artifacts["kubeflow-manifests"], cat.artifacts["argo-workflows"]
    assert (m.version, m.commit, m.tree) == ("26.03", "d68ebc7fab366ab40ddd1541d2ec22febb31bc83",
                                             "7db24853841f1a7723639f5a2a65bd37150a29df")
    assert (a.version, a.commit, a.tree) == ("v3.7.3", "bded09fe4abd37cb98d7fc81b4c14a6f5034e9ab",
                                             "2cd2e67448c02009a2d39d2a2caf5c199c8575e0")
    assert m.url.endswith(f"/archive/{m.commit}.tar.gz")  # fetched by commit
    assert cat.artifacts["nvidia-container-toolkit-key"].fingerprint == \
        "C95B321B61E88C1809C4F759DDCAE044F796ECB0"


def test_cli_pins_and_refuses_without_a_traceback(srv, vfile, tmp_path, kflab):
    """The real `kflab components pin` in a child process, sources from the environment."""
    publish_k3s(srv, wrong="k3s-arm64")
    env = {"KFLAB_GITHUB_URL": srv.url, "KFLAB_GITHUB_API_URL": f"{srv.url}/api"}
    before = vfile.read_bytes()
    bad = kflab("components", "pin", "--file", str(vfile), f"k3s={K3S_NEW}", env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "error: k3s v1.99.0+k3s1 (arm64): k3s-arm64 downloaded with sha256" in bad.stderr
    assert vfile.read_bytes() == before
    publish_k3s(srv)
    ok = kflab("components", "pin", "--file", str(vfile), f"k3s={K3S_NEW}", env=env)
    assert ok.returncode == 0, ok.stderr
    assert f"k3s.version: v1.34.2+k3s1 -> {K3S_NEW}" in ok.stdout
    assert f"wrote {vfile}" in ok.stdout
    assert catalog.load(vfile).artifacts["k3s"].version == K3S_NEW
    same = kflab("components", "pin", "--file", str(vfile), "k3s", env=env)
    assert same.returncode == 0 and "unchanged" in same.stdout, same.stdout + same.stderr
