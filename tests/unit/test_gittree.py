"""lab/components/gittree.py against git itself: every id is compared with what git prints for
a real repository built here (write-tree, rev-parse HEAD^{tree}, hash-object,
get-tar-commit-id), never with a value written in the test."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.components import gittree
from tests.gitrepo import archive, commit_all, git

SCRIPT = Path(gittree.__file__)


def edge_tree(root: Path) -> None:
    """Everything that can trip a tree hash: CRLF, an executable, symlinks, nested and empty
    folders, empty files, names that sort differently as folders, non-ASCII names."""
    (root / "README.md").write_bytes(b"# title\r\n\r\nCRLF as stored upstream\r\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "group-readable-exec").write_bytes(b"x")
    (root / "group-readable-exec").chmod(0o654)  # only group x: git stores 100644
    for name in ("a-b", "a.b", "a0"):
        (root / name).write_text(name)
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "deep.yaml").write_text("kind: Deep\n")
    (root / "a" / "b" / "empty.txt").write_bytes(b"")
    (root / "a" / "link").symlink_to("b/c/deep.yaml")
    (root / "dangling").symlink_to("does/not/exist")
    (root / "dirlink").symlink_to("a")
    (root / "only-empty" / "nested-empty").mkdir(parents=True)  # git does not track it
    (root / "naïve – ü.txt").write_text("unicode\n")
    (root / "with space").write_text("s")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "repo"
    root.mkdir()
    edge_tree(root)
    commit, tree = commit_all(root)
    return root, commit, tree


def test_folder_tree_is_gits_tree(repo):
    root, _, tree = repo
    assert git(root, "write-tree") == tree  # the index holds exactly the folder
    assert gittree.dir_tree(root) == tree


def test_archive_commit_and_tree_are_gits(repo, tmp_path):
    root, commit, tree = repo
    out = archive(root, "manifests-26.03", tmp_path / "a.tar.gz")
    raw = gzip.decompress(out.read_bytes())
    assert git(root, "get-tar-commit-id", stdin=raw) == commit
    assert gittree.archive_ids(out) == (commit, tree)
    plain = tmp_path / "a.tar"  # the same, not compressed
    plain.write_bytes(raw)
    assert gittree.archive_ids(plain) == (commit, tree)


def test_crlf_is_hashed_as_stored_and_matters(repo):
    root, _, tree = repo
    readme = root / "README.md"
    readme.write_bytes(readme.read_bytes().replace(b"\r\n", b"\n"))
    _, lf_tree = commit_all(root)
    assert lf_tree != tree
    assert gittree.dir_tree(root) == lf_tree


def test_mode_and_symlink_target_change_the_tree(repo):
    root, _, tree = repo
    (root / "run.sh").chmod(0o644)
    _, no_exec = commit_all(root)
    assert no_exec != tree and gittree.dir_tree(root) == no_exec
    (root / "a" / "link").unlink()
    (root / "a" / "link").symlink_to("b/empty.txt")
    _, retarget = commit_all(root)
    assert retarget != no_exec and gittree.dir_tree(root) == retarget


def test_empty_blob_and_empty_tree_match_git(tmp_path):
    tmp_path.joinpath("e").write_bytes(b"")
    assert gittree.blob_id(b"") == git(tmp_path, "hash-object", str(tmp_path / "e"))
    empty = tmp_path / "empty"
    (empty / "only" / "folders").mkdir(parents=True)
    git(empty, "init", "-q")
    assert gittree.dir_tree(empty) == git(empty, "write-tree")


names = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
                min_size=1, max_size=8).filter(lambda n: n not in (".", "..", ".git"))
files = st.tuples(st.binary(max_size=64), st.booleans())  # (content, executable)
trees = st.recursive(files, lambda inner: st.dictionaries(names, inner, min_size=0,
                                                          max_size=4), max_leaves=12)


def materialize(path: Path, node) -> None:
    if isinstance(node, dict):
        path.mkdir()
        for name, child in node.items():
            materialize(path / name, child)
    else:
        content, executable = node
        path.write_bytes(content)
        path.chmod(0o755 if executable else 0o644)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.dictionaries(names, trees, min_size=1, max_size=5))
def test_random_trees_match_git_write_tree(tmp_path_factory, tree):
    root = tmp_path_factory.mktemp("rand")
    for name, node in tree.items():
        materialize(root / name, node)
    git(root, "init", "-q")
    git(root, "config", "core.autocrlf", "false")
    git(root, "add", "-A")
    assert gittree.dir_tree(root) == git(root, "write-tree")


def tar_with(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
             comment: str | None = None) -> Path:
    out = tmp_path / "hand.tar.gz"
    headers = {"comment": comment} if comment else {}
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=headers) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out


def info(name: str, kind: bytes = tarfile.REGTYPE, **kw) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode = kind, 0o644
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def test_a_python_written_archive_reads_like_gits(tmp_path):
    """The stand-in archives some tests write with tarfile carry the commit id as GitHub's
    do: git's own get-tar-commit-id reads it."""
    commit = "d68ebc7fab366ab40ddd1541d2ec22febb31bc83"
    out = tar_with(tmp_path, [(info("top", tarfile.DIRTYPE), None),
                              (info("top/f"), b"data\n")], comment=commit)
    assert git(tmp_path, "get-tar-commit-id", stdin=gzip.decompress(out.read_bytes())) == commit
    got_commit, tree = gittree.archive_ids(out)
    (tmp_path / "same").mkdir()
    (tmp_path / "same" / "f").write_bytes(b"data\n")
    assert got_commit == commit and tree == gittree.dir_tree(tmp_path / "same")
    assert tree == commit_all(tmp_path / "same")[1]


@pytest.mark.parametrize("members, problem", [
    ([(info("top", tarfile.DIRTYPE), None), (info("top/../evil"), b"x")], "path git cannot"),
    ([(info("/abs"), b"x")], "absolute"),
    ([(info("top", tarfile.DIRTYPE), None), (info("other/f"), b"x")], "more than one top"),
    ([(info("top", tarfile.DIRTYPE), None), (info("top/f"), b"x"), (info("top/f"), b"y")],
     "appears twice"),
    ([(info("top", tarfile.DIRTYPE), None), (info("top/f"), b"x"),
      (info("top/h", tarfile.LNKTYPE, linkname="top/f"), None)], "hard link"),
    ([(info("top", tarfile.DIRTYPE), None), (info("top/dev", tarfile.CHRTYPE), None)],
     "special file"),
    ([(info("top", tarfile.DIRTYPE), None), (info("top/.git/config"), b"x")],
     "path git cannot"),
    ([(info("top", tarfile.DIRTYPE), None), (info("top/f"), b"x"), (info("top/f/g"), b"y")],
     "below a file"),
    ([(info("loose"), b"x")], "not a folder"),
])
def test_archives_git_would_not_write_are_refused(tmp_path, members, problem):
    with pytest.raises(gittree.TreeError, match=problem):
        gittree.archive_ids(tar_with(tmp_path, members))


def test_a_file_added_to_an_archive_changes_its_tree(repo, tmp_path):
    root, commit, tree = repo
    out = archive(root, "x", tmp_path / "a.tar")
    with tarfile.open(out, "a") as tar:
        ti = info("x/extra.yaml")
        ti.size = 3
        tar.addfile(ti, io.BytesIO(b"new"))
    got_commit, got_tree = gittree.archive_ids(out)
    assert got_commit == commit and got_tree != tree


def test_not_an_archive_is_an_error(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"<html>rate limited</html>")
    with pytest.raises(gittree.TreeError, match="not a tar archive"):
        gittree.archive_ids(bad)


@pytest.mark.parametrize("python", ["/usr/bin/python3", sys.executable])
def test_script_prints_json_as_the_role_reads_it(repo, tmp_path, python):
    """The kubeflow role runs this file with the node's own python3."""
    if not Path(python).exists():
        pytest.skip(f"{python} not here")
    root, commit, tree = repo
    out = archive(root, "top", tmp_path / "a.tar.gz")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([python, str(SCRIPT), str(out)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"commit": commit, "tree": tree}
    proc = subprocess.run([python, str(SCRIPT), str(root)], capture_output=True, text=True,
                          env=env, check=False)
    assert json.loads(proc.stdout) == {"commit": None, "tree": tree}
    bad = tmp_path / "bad"
    bad.write_bytes(b"nope")
    proc = subprocess.run([python, str(SCRIPT), str(bad)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 1 and "not a tar archive" in proc.stderr and not proc.stdout


@pytest.mark.parametrize("folder, pin_name", [("kubeflow-manifests-26.03", "kubeflow-manifests"),
                                              ("argo-workflows-v3.7.3", "argo-workflows")])
def test_standin_archives_from_shared_upstream(shared, tmp_path, folder, pin_name):
    """The stand-in trees the role tests use: git and this code agree on them, and (being a
    partial copy) they are NOT the real release, whose pin stays in versions.yaml."""
    import shutil

    import yaml

    from tests.conftest import REPO

    repo = tmp_path / "repo"
    shutil.copytree(shared / "upstream" / folder, repo)
    commit, tree = commit_all(repo)
    assert gittree.dir_tree(shared / "upstream" / folder) == tree  # read in place
    out = archive(repo, folder, tmp_path / "standin.tar.gz")
    assert gittree.archive_ids(out) == (commit, tree)
    real = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    assert tree != real["artifacts"][pin_name]["tree"]
