"""The kubeflow role's source step, for real, on the systemd container, in offline mode. STAND-IN
archives are made here from ../shared/upstream exactly as GitHub makes its archives (`git
archive` of a commit: top folders manifests-26.03/, argo-workflows-3.7.3/ and jobset-0.10.1/,
the commit id in the pax header), with KFP's Argo references back in their github.com form.
../shared is a partial copy, so its tree is not the real release's: the test pins the stand-
in's commit and tree as git itself reports them (the real pins stay in
manifests/versions.yaml). The role must verify commit and tree id on the node, unpack, make the
Argo references local and root our overlays at the tree, so that kustomize on the node renders
exactly what the tests render from ../shared (kubectl is copied in to render; k3s cannot run in
the container). An archive with another tree or commit is refused, removed and never unpacked."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from lab.components.render import render
from tests.gitrepo import archive, commit_all
from tests.integration.ansible_helpers import REPO, run_playbook
from tests.integration.conftest import podman

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PLAY = """
- name: Kubeflow sources only
  hosts: lab
  gather_facts: false
  tasks:
    - name: The kubeflow role's source step
      ansible.builtin.import_role:
        name: kubeflow
        tasks_from: sources
"""
GITHUB = "https://github.com/argoproj/argo-workflows/"


def standin_repo(src: Path, repo: Path, restore_github: bool = False) -> tuple[str, str, int]:
    """Copy SRC into a git repository and commit it: (commit, tree, how many Argo references
    went back to their GitHub form)."""
    shutil.copytree(src, repo)
    restored = 0
    if restore_github:
        for path in sorted(repo.rglob("kustomization.yaml")):
            if "argo" not in str(path):
                continue
            text, n = re.subn(r"(\.\./)+argo-workflows-v3\.7\.3/(manifests/\S+)",
                              lambda m: f"{GITHUB}{m.group(2)}?ref=v3.7.3", path.read_text())
            restored += n
            path.write_text(text)
    commit, tree = commit_all(repo)
    return commit, tree, restored


def pin_standin(arts: dict, name: str, commit: str, tree: str) -> None:
    """The stand-in's pins, fetched by commit like the real ones (the URL is never used:
    offline mode)."""
    owner_repo = arts[name]["url"].split("/archive/")[0]
    arts[name].update(commit=commit, tree=tree, url=f"{owner_repo}/archive/{commit}.tar.gz")


@pytest.fixture(scope="module")
def sources(target):
    from tests.conftest import need_upstream

    upstream = need_upstream()
    need_upstream("kubeflow-manifests-26.03")
    if not shutil.which("kubectl"):
        pytest.skip("needs kubectl (scripts/standins/21-kubectl.sh)")
    tmp = target["tmp"]
    offline = tmp / "offline"
    offline.mkdir()
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    arts = versions["artifacts"]
    kf_commit, kf_tree, restored = standin_repo(upstream / "kubeflow-manifests-26.03",
                                                tmp / "kf-repo", restore_github=True)
    assert restored == 5, restored  # as in the real release: 5 references in 4 files
    assert kf_tree != arts["kubeflow-manifests"]["tree"]  # a partial copy, not the release
    archive(tmp / "kf-repo", "manifests-26.03", offline / arts["kubeflow-manifests"]["file"])
    pin_standin(arts, "kubeflow-manifests", kf_commit, kf_tree)
    argo_commit, argo_tree, _ = standin_repo(upstream / "argo-workflows-v3.7.3",
                                             tmp / "argo-repo")
    archive(tmp / "argo-repo", "argo-workflows-3.7.3", offline / arts["argo-workflows"]["file"])
    pin_standin(arts, "argo-workflows", argo_commit, argo_tree)
    jobset_commit, jobset_tree, _ = standin_repo(upstream / "jobset-v0.10.1", tmp / "jobset-repo")
    archive(tmp / "jobset-repo", "jobset-0.10.1", offline / arts["jobset"]["file"])
    pin_standin(arts, "jobset", jobset_commit, jobset_tree)
    (tmp / "versions.yaml").write_text(yaml.safe_dump(versions))
    (tmp / "sources.yml").write_text(PLAY)
    extra = {"kflab_offline_dir": str(offline), "kflab_versions_file": str(tmp / "versions.yaml"),
             "kflab_state_dir": "/var/lib/kflab",
             "kflab_overlays_dir": str(REPO / "manifests" / "overlays"),
             "kflab_components": ["cert-manager", "pipelines", "katib", "training-operator",
                                  "kserve", "trainer"]}
    first = run_playbook(tmp / "sources.yml", target["inventory"], extra, tmp)
    assert first.rc == 0, first.output[-4000:]
    podman("cp", shutil.which("kubectl"), f"{target['name']}:/usr/local/bin/kubectl")
    return {**target, "first": first, "extra": extra, "upstream": upstream, "versions": versions,
            "offline": offline}


def test_commit_and_tree_verified_on_the_node(sources):
    """The verification ran on the node, with the node's python3, on the pinned values."""
    out = " ".join(sources["first"].output.split())
    for name in ("kubeflow-manifests", "argo-workflows", "jobset"):
        assert f"Refuse a source that is not the pinned commit and tree: {name}" in out
    arts = sources["versions"]["artifacts"]
    listing = podman("exec", sources["name"], "ls", "/var/lib/kflab/downloads").stdout.split()
    assert sorted(listing) == sorted([arts["kubeflow-manifests"]["file"],
                                      arts["argo-workflows"]["file"], arts["jobset"]["file"]])


def test_sources_step_is_idempotent(sources):
    assert sources["first"].recap("kflab-node")["changed"] > 0
    again = run_playbook(sources["tmp"] / "sources.yml", sources["inventory"], sources["extra"],
                         sources["tmp"])
    assert again.rc == 0 and again.recap("kflab-node")["changed"] == 0, again.output[-4000:]


def test_argo_references_are_local_on_the_node(sources):
    tree = "/var/lib/kflab/src/kubeflow-manifests-26.03/applications/pipeline/upstream/third-party"
    out = podman("exec", sources["name"], "grep", "-r", "argo-workflows", tree,
                 "--include=kustomization.yaml").stdout
    assert "argo-workflows-v3.7.3/manifests/" in out
    assert "github.com" not in out


# pipelines: the Argo references; trainer: JobSet's tree linked beside the release
@pytest.mark.parametrize("component", ["pipelines", "trainer"])
def test_node_renders_what_the_tests_render(sources, component):
    on_node = podman("exec", sources["name"], "kubectl", "kustomize",
                     f"/var/lib/kflab/overlays/{component}", timeout=300).stdout
    node_objs = [d for d in yaml.load_all(on_node, Loader=yaml.CSafeLoader) if d]
    here = render(component, sources["upstream"] / "kubeflow-manifests-26.03")
    assert node_objs == here


@pytest.mark.parametrize("components, message", [
    (["kubeflow-all"], "kflab_components: unknown ['kubeflow-all']"),
    (["kserve"], "kflab_components: kserve needs cert-manager; add it."),
])
def test_bad_component_selection_is_refused_first(sources, components, message):
    extra = {**sources["extra"], "kflab_components": components}
    result = run_playbook(sources["tmp"] / "sources.yml", sources["inventory"], extra,
                          sources["tmp"])
    assert result.rc != 0 and message in result.output, result.output[-3000:]
    assert result.recap("kflab-node")["changed"] == 0


def tampered_run(sources, tmp_name: str, change) -> tuple[object, str]:
    """Run the step in a fresh state folder on the node with an offline archive made by
    CHANGE(repo) from the pinned stand-in; returns (result, archive file name)."""
    tmp = sources["tmp"]
    arts = sources["versions"]["artifacts"]
    repo = tmp / tmp_name
    shutil.copytree(tmp / "argo-repo", repo, symlinks=True)
    change(repo)
    commit_all(repo)
    offline = tmp / f"{tmp_name}-offline"
    offline.mkdir()
    shutil.copy(sources["offline"] / arts["kubeflow-manifests"]["file"], offline)
    shutil.copy(sources["offline"] / arts["jobset"]["file"], offline)
    archive(repo, "argo-workflows-3.7.3", offline / arts["argo-workflows"]["file"])
    extra = {**sources["extra"], "kflab_offline_dir": str(offline),
             "kflab_state_dir": f"/var/lib/{tmp_name}"}
    return run_playbook(tmp / "sources.yml", sources["inventory"], extra, tmp), \
        arts["argo-workflows"]["file"]


@pytest.mark.parametrize("what, change", [
    ("tree", lambda repo: (repo / "manifests" / "extra.yaml").write_text("kind: Extra\n")),
    ("commit", lambda repo: None),  # the same tree, committed again: another commit id
])
def test_archive_that_is_not_the_pin_is_refused_and_removed(sources, what, change):
    result, file = tampered_run(sources, f"kflab-tampered-{what}", change)
    out = " ".join(result.output.split())
    assert result.rc != 0
    assert "argo-workflows v3.7.3: argo-workflows-v3.7.3.tar.gz" in out, out[-3000:]
    assert "is not the pinned source, so it was removed and nothing was unpacked" in out
    pins = sources["versions"]["artifacts"]["argo-workflows"]
    assert f"pins commit {pins['commit']} tree {pins['tree']}" in out
    has = re.search(r"the archive has commit ([0-9a-f]{40}) tree ([0-9a-f]{40})", out)
    assert has, out[-3000:]
    differs = {"tree": has.group(2) != pins["tree"], "commit": has.group(1) != pins["commit"]}
    assert differs[what] and (what == "commit" or has.group(1) != pins["commit"])
    state = f"/var/lib/kflab-tampered-{what}"
    left = podman("exec", sources["name"], "ls", f"{state}/downloads").stdout.split()
    assert file not in left
    unpacked = podman("exec", sources["name"], "find", f"{state}/src", "-mindepth", "2").stdout
    assert "argo-workflows" not in unpacked  # nothing of it was unpacked
