"""The kubeflow role's source step, for real, on the systemd container, in offline mode:
STAND-IN tarballs are packed here from ../shared/upstream in the layout of GitHub's release
archives (top folders manifests-26.03/ and argo-workflows-3.7.3/, KFP's Argo references back to
their github.com form), pinned by their own sha256. The role must verify, unpack, make the Argo
references local and root our overlays at the tree, so that kustomize on the node renders
exactly what the tests render from ../shared (kubectl is copied in to render; k3s cannot run
in the container). A tampered offline file is refused by the same artifact role: see
test_k3s_download.py."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from lab.components.render import render
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


def pack(src: Path, top: str, out: Path, restore_github: bool = False) -> tuple[str, int]:
    """Tar src under top/; returns (sha256, how many Argo references went back to GitHub)."""
    restored = 0
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:
        for path in sorted(src.rglob("*")):
            arc = f"{top}/{path.relative_to(src)}"
            if restore_github and path.name == "kustomization.yaml" and "argo" in str(path):
                text, n = re.subn(r"(\.\./)+argo-workflows-v3\.7\.3/(manifests/\S+)",
                                  lambda m: f"{GITHUB}{m.group(2)}?ref=v3.7.3", path.read_text())
                restored += n
                data = text.encode()
                info = tarfile.TarInfo(arc)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.add(path, arcname=arc, recursive=False)
    return hashlib.sha256(out.read_bytes()).hexdigest(), restored


@pytest.fixture(scope="module")
def sources(target):
    from tests.conftest import SHARED

    upstream = SHARED / "upstream"
    if not (upstream / "kubeflow-manifests-26.03").is_dir() or not shutil.which("kubectl"):
        pytest.skip("needs ../shared/upstream and kubectl")
    tmp = target["tmp"]
    offline = tmp / "offline"
    offline.mkdir()
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    arts = versions["artifacts"]
    arts["kubeflow-manifests"]["sha256"], restored = pack(
        upstream / "kubeflow-manifests-26.03", "manifests-26.03",
        offline / arts["kubeflow-manifests"]["file"], restore_github=True)
    assert restored == 5, restored  # as in the real release: 5 references in 4 files
    arts["argo-workflows"]["sha256"], _ = pack(upstream / "argo-workflows-v3.7.3",
                                            "argo-workflows-3.7.3",
                                            offline / arts["argo-workflows"]["file"])
    (tmp / "versions.yaml").write_text(yaml.safe_dump(versions))
    (tmp / "sources.yml").write_text(PLAY)
    extra = {"kflab_offline_dir": str(offline), "kflab_versions_file": str(tmp / "versions.yaml"),
             "kflab_state_dir": "/var/lib/kflab",
             "kflab_overlays_dir": str(REPO / "manifests" / "overlays"),
             "kflab_components": ["cert-manager", "pipelines", "katib", "training-operator",
                                  "kserve"]}
    first = run_playbook(tmp / "sources.yml", target["inventory"], extra, tmp)
    assert first.rc == 0, first.output[-4000:]
    podman("cp", shutil.which("kubectl"), f"{target['name']}:/usr/local/bin/kubectl")
    return {**target, "first": first, "extra": extra, "upstream": upstream}


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


@pytest.mark.parametrize("component", ["pipelines"])  # the one with the Argo references
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
