"""scripts/fetch_upstream.py: the upstream test data, downloaded at a pinned commit and verified.

The real archives come from github.com, which these machines cannot reach: the download path is
tested against a loopback server (tests/artifact_server.py) serving STAND-IN archives made here
with `git archive` exactly as GitHub makes them (a pax header with the commit id). The stand-in
repository holds the files the tests read with KFP's Argo references back in their github.com
form, so the same code that unpacks the real release is what turns it into the tests' folder;
a stand-in cannot have the real commit, so its pins are the ones git reports for it. The real
pins are held to the copy the tests read (../shared in CI): its git tree id is `tree_kept`."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from lab.components import gittree
from tests.artifact_server import serve
from tests.conftest import REPO, SHARED, need_upstream
from tests.gitrepo import archive, commit_all

_spec = importlib.util.spec_from_file_location("fetch_upstream",
                                               REPO / "scripts" / "fetch_upstream.py")
fetch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fetch)

GITHUB_ARGO = "https://github.com/argoproj/argo-workflows/"


def _standin(tmp: Path, name: str, files: dict[str, str]) -> tuple[str, str, Path]:
    """A git repository with FILES, committed and archived as GitHub serves it."""
    repo = tmp / f"{name}-repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit, tree = commit_all(repo)
    out = archive(repo, f"{name}-{commit}", tmp / f"{name}.tar.gz")
    return commit, tree, out


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with serve(tmp_path / "www") as server:
        monkeypatch.setenv("KFLAB_GITHUB_URL", server.url)
        yield server


def _spec_for(server, owner_repo: str, commit: str, tree: str, data: bytes, **extra) -> dict:
    server.put(f"{owner_repo}/archive/{commit}.tar.gz", data)
    return {"url": f"https://github.com/{owner_repo}/archive/{commit}.tar.gz", "commit": commit,
            "tree": tree, **extra}


def test_a_tree_is_downloaded_verified_and_kept_in_part(github, tmp_path: Path) -> None:
    commit, tree, out = _standin(tmp_path, "pipelines", {
        "backend/api/v2beta1/run.proto": "syntax = 'proto3';\n",
        "backend/api/v2beta1/swagger/run.swagger.json": "{}\n",
        "backend/api/v2beta1/auth.proto": "left out\n",
        "README.md": "left out\n"})
    spec = _spec_for(github, "kubeflow/pipelines", commit, tree, out.read_bytes(),
                     keep=["backend/api/v2beta1/run.proto", "backend/api/v2beta1/swagger"],
                     move=["backend/api/v2beta1", "v2beta1"], tree_kept="0" * 40)
    said: list[str] = []
    kept = fetch.fetch_tree("kfp-api", spec, tmp_path / "up", print_trees=True, say=said.append)
    folder = tmp_path / "up" / "kfp-api"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) \
        == ["v2beta1/run.proto", "v2beta1/swagger/run.swagger.json"]
    assert kept == gittree.dir_tree(folder)
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in folder.rglob("*") if p.is_file())
    assert f"kfp-api: tree_kept {kept}" in said
    assert github.fetched(f"/kubeflow/pipelines/archive/{commit}.tar.gz") == 1

    # Pinned now: a second run finds the stamp and downloads nothing.
    spec["tree_kept"] = kept
    assert fetch.fetch_tree("kfp-api", spec, tmp_path / "up", say=said.append) == kept
    assert github.fetched(f"/kubeflow/pipelines/archive/{commit}.tar.gz") == 1


def test_an_archive_of_another_commit_is_refused_and_nothing_is_unpacked(
        github, tmp_path: Path) -> None:
    commit, tree, out = _standin(tmp_path, "jobset", {"config/default/kustomization.yaml": "a\n"})
    other = "1" * 40
    spec = _spec_for(github, "kubernetes-sigs/jobset", other, tree, out.read_bytes(),
                     keep=["config"], tree_kept="0" * 40)
    with pytest.raises(fetch.FetchError, match=f"is commit {commit} tree {tree}, not the pinned "
                                                f"{other}"):
        fetch.fetch_tree("jobset", spec, tmp_path / "up")
    assert not (tmp_path / "up" / "jobset").exists()
    assert [p.name for p in (tmp_path / "up").iterdir()] == []  # no temporary left either


def test_kept_files_that_differ_from_the_pin_are_refused(github, tmp_path: Path) -> None:
    commit, tree, out = _standin(tmp_path, "jobset", {"config/default/kustomization.yaml": "a\n"})
    spec = _spec_for(github, "kubernetes-sigs/jobset", commit, tree, out.read_bytes(),
                     keep=["config"], tree_kept="0" * 40)
    with pytest.raises(fetch.FetchError, match="the kept files have tree"):
        fetch.fetch_tree("jobset", spec, tmp_path / "up")
    assert not (tmp_path / "up" / "jobset").exists()


def test_no_network_is_one_line_the_tests_read_as_their_skip_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("KFLAB_GITHUB_URL", "http://127.0.0.1:9")  # a closed port: no network
    assert fetch.main(["--dest", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "download failed: http://127.0.0.1:9/kubeflow/manifests/archive/" \
        in err[0] and "no network?" in err[0], err
    assert (tmp_path / "upstream" / fetch.FAILED).read_text().strip() == \
        err[0].removeprefix("fetch_upstream: ")


def test_the_kubeflow_release_becomes_the_folder_the_tests_read(github, tmp_path: Path) -> None:
    """The release's Argo references point at github.com; the kept folder points them at the
    sibling Argo tree, as the kubeflow role does on the node, and equals the tests' copy."""
    shared = need_upstream("kubeflow-manifests-26.03")
    files, restored = {}, 0
    for path in shared.rglob("*"):
        if path.is_file():
            text = path.read_text()
            if path.name == "kustomization.yaml":
                text, n = re.subn(r"(\.\./)+argo-workflows-v3\.7\.3/(manifests/\S+)",
                                  lambda m: f"{GITHUB_ARGO}{m.group(2)}?ref=v3.7.3", text)
                restored += n
            files[path.relative_to(shared).as_posix()] = text
    assert restored == 5  # as in the real release: 5 references in 4 files
    files["README.md"] = "not kept: only the folders the tests read\n"
    files["applications/katib/upstream/OWNERS"] = "not kept: not a manifest\n"
    commit, tree, out = _standin(tmp_path, "manifests", files)
    pins = fetch.load_pins()
    spec = _spec_for(github, "kubeflow/manifests", commit, tree, out.read_bytes(),
                     **{k: v for k, v in pins["kubeflow-manifests-26.03"].items()
                        if k in ("keep", "suffixes", "argo_local", "tree_kept")})
    kept = fetch.fetch_tree("kubeflow-manifests-26.03", spec, tmp_path / "up")
    assert kept == pins["kubeflow-manifests-26.03"]["tree_kept"] == gittree.dir_tree(shared)


def test_the_pins_are_the_product_pins_and_match_the_copy_the_tests_read() -> None:
    """url, commit and tree come from manifests/versions.yaml where the product pins the same
    source; tree_kept is the tree of the folder the tests read (../shared in CI, or fetched)."""
    import yaml

    arts = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())["artifacts"]
    pins = fetch.load_pins()
    assert pins["kubeflow-manifests-26.03"]["tree"] == arts["kubeflow-manifests"]["tree"]
    assert set(pins) == {"kubeflow-manifests-26.03", "argo-workflows-v3.7.3", "jobset-v0.10.1",
                         "kfp-api-2.16.0"}
    for folder, spec in pins.items():
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/archive/[0-9a-f]{40}\.tar\.gz",
                            spec["url"]) and spec["commit"] in spec["url"], folder
        assert gittree.dir_tree(need_upstream(folder)) == spec["tree_kept"], folder


def test_the_tests_look_where_the_script_fills(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    assert fetch.shared_root()[0] == SHARED  # tests/conftest.py agrees, for this checkout
    repo = tmp_path / "clone"
    repo.mkdir()
    monkeypatch.delenv("KFLAB_SHARED", raising=False)
    assert fetch.shared_root(repo) == (repo / ".cache" / "shared", True)
    (tmp_path / "shared" / "upstream").mkdir(parents=True)
    assert fetch.shared_root(repo) == (tmp_path / "shared", False)
    monkeypatch.setenv("KFLAB_SHARED", str(tmp_path / "elsewhere"))
    assert fetch.shared_root(repo) == (tmp_path / "elsewhere", False)
