"""node + gpu (no-GPU path) + verify roles, for real, through site.yml and its tags, against a
systemd container (podman + runc, built by scripts/standins/20-systemd-target.sh) reached over
SSH like a VM (kflab_provider vagrant-libvirt); checked with testinfra; a second run must
report changed=0. (A user's own machine: tests/integration/test_roles_host.py.)

The container has no Kubernetes, so verify runs with verify_cluster=false (its node half); the
cluster half runs workloads on a real cluster: its objects and programs are tested offline by
tests/unit/test_verify_workloads.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.ansible_helpers import PLAYBOOKS, REPO, run_playbook
from tests.integration.conftest import CONF, podman

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def contract_vars(tmp: Path) -> dict:
    """The VARS.json the kflab runner passes (issue 3's contract), plus verify_cluster."""
    return {"kflab_components": ["cert-manager", "pipelines", "katib", "training-operator",
                                 "kserve"],
            "kflab_provider": "vagrant-libvirt",
            "kflab_gpu": True, "kflab_offline_dir": "",
            "kflab_kubeconfig_dest": str(tmp / "kubeconfig"),
            "kflab_versions_file": str(REPO / "manifests" / "versions.yaml"),
            "kflab_overlays_dir": str(REPO / "manifests" / "overlays"),
            "verify_cluster": False}


def site(target: dict, *args: str):
    return run_playbook(PLAYBOOKS / "site.yml", target["inventory"],
                        contract_vars(target["tmp"]), target["tmp"],
                        "--tags", "node,gpu,verify", *args)


@pytest.fixture(scope="module")
def converged(target) -> dict:
    first = site(target)
    assert first.rc == 0, first.output[-4000:]
    target["first"] = first
    return target


@pytest.fixture(scope="module")
def host(converged):
    import testinfra

    return testinfra.get_host(f"podman://{converged['name']}")


def test_first_run_changes_then_second_run_changes_nothing(converged):
    assert converged["first"].recap("kflab-node")["changed"] > 0
    again = site(converged)
    assert again.rc == 0, again.output[-4000:]
    recap = again.recap("kflab-node")
    assert recap["changed"] == 0 and recap["failed"] == 0, again.output[-4000:]


def test_node_packages_installed(host):
    for pkg in ("conntrack", "iptables", "socat", "curl", "ca-certificates",
                "cloud-guest-utils"):  # growpart: a VM's root grows to its disk
        assert host.package(pkg).is_installed, pkg


def test_node_sysctls_and_modules_persisted(host):
    sysctl = host.file("/etc/sysctl.d/90-kflab.conf")
    assert sysctl.user == "root" and sysctl.mode == 0o644
    assert "fs.inotify.max_user_instances = 1280" in sysctl.content_string
    assert "fs.inotify.max_user_watches = 655360" in sysctl.content_string
    assert "net.ipv4.ip_forward = 1" in sysctl.content_string
    modules = host.file("/etc/modules-load.d/kflab.conf").content_string.split()
    assert modules == ["br_netfilter", "overlay"]


def test_swap_entry_commented_out(host):
    fstab = host.file("/etc/fstab").content_string
    assert "# /swapfile none swap sw 0 0  # disabled by kflab" in fstab
    assert not [line for line in fstab.splitlines()
                if line.startswith("/swapfile")], fstab


def test_gpu_role_skips_without_a_gpu(converged, host):
    out = converged["first"].output
    assert "GPU setup skipped: no NVIDIA GPU found on this node" in out
    assert not host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").exists
    assert not host.package("nvidia-container-toolkit").is_installed


def test_verify_reports_skipped_cluster_checks(converged):
    assert "Cluster checks skipped (verify_cluster is false)" in converged["first"].output


def test_verify_fails_when_a_node_setting_is_missing(converged, host):
    """The verify role's node check can fail: drop one sysctl and run --tags verify."""
    path = "/etc/sysctl.d/90-kflab.conf"
    original = host.file(path).content_string
    podman("exec", converged["name"], "sed", "-i", "/max_user_watches/d", path)
    try:
        result = run_playbook(PLAYBOOKS / "site.yml", converged["inventory"],
                              contract_vars(converged["tmp"]), converged["tmp"],
                              "--tags", "verify")
        assert result.rc != 0
        assert "lacks fs.inotify.max_user_watches = 655360" in result.output, result.output[-3000:]
    finally:
        subprocess.run(["podman", "exec", "-i", converged["name"], "sh", "-c", f"cat > {path}"],
                       input=original, text=True, check=True,
                       env={**os.environ, "CONTAINERS_CONF": str(CONF)})


STANDIN_KUBECONFIG = """\
# STAND-IN for the admin kubeconfig k3s writes (no k3s runs in the test container)
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: U1RBTkQtSU4gQ0E=
    server: https://127.0.0.1:6443
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    client-certificate-data: U1RBTkQtSU4gY2VydA==
    client-key-data: U1RBTkQtSU4ga2V5
"""
KUBECONFIG_PLAY = """
- name: Kubeconfig hand-off only
  hosts: lab
  gather_facts: false
  tasks:
    - name: The k3s role's kubeconfig step
      ansible.builtin.import_role:
        name: k3s
        tasks_from: kubeconfig
"""


def test_kubeconfig_handed_over_0600_with_the_provider_address(target):
    import yaml

    tmp = target["tmp"]
    podman("exec", target["name"], "mkdir", "-p", "/etc/rancher/k3s")
    subprocess.run(["podman", "exec", "-i", target["name"], "sh", "-c",
                    "umask 077; cat > /etc/rancher/k3s/k3s.yaml"], input=STANDIN_KUBECONFIG,
                   text=True, check=True, env={**os.environ, "CONTAINERS_CONF": str(CONF)})
    dest = tmp / "handoff" / "kubeconfig"
    dest.parent.mkdir()
    dest.write_text("stale")
    dest.chmod(0o644)
    (tmp / "kubeconfig.yml").write_text(KUBECONFIG_PLAY)
    extra = {"kflab_kubeconfig_dest": str(dest), "kflab_api_address": "192.0.2.10",
             "kflab_api_port": 16443}
    first = run_playbook(tmp / "kubeconfig.yml", target["inventory"], extra, tmp)
    assert first.rc == 0, first.output[-3000:]
    assert dest.stat().st_mode & 0o777 == 0o600
    got, want = yaml.safe_load(dest.read_text()), yaml.safe_load(STANDIN_KUBECONFIG)
    assert got["clusters"][0]["cluster"]["server"] == "https://192.0.2.10:16443"
    want["clusters"][0]["cluster"]["server"] = "https://192.0.2.10:16443"
    assert got == want
    assert "U1RBTkQtSU4ga2V5" not in first.output  # the key is never printed
    again = run_playbook(tmp / "kubeconfig.yml", target["inventory"], extra, tmp)
    assert again.rc == 0 and again.recap("kflab-node")["changed"] == 0, again.output[-3000:]
