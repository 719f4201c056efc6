"""The lab commands' CLI surface: doctor reads the profile, clear errors without a lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import cli


def test_doctor_judges_the_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.yaml").write_text("provider: wsl2\n")
    res = CliRunner().invoke(cli, ["doctor", "--json"])
    names = {r["name"]: r for r in json.loads(res.output)}
    assert {"wsl version", "systemd", "cuda on wsl"} <= set(names)  # the wsl2 rows
    assert res.exit_code == 1  # this CI machine is not WSL: a fail row
    (tmp_path / "lab.yaml").write_text("provider: vagrant-libvirt\ncpus: 3\nmemory: 2000\n")
    res = CliRunner().invoke(cli, ["doctor", "--json"])
    names = {r["name"]: r for r in json.loads(res.output)}
    assert names["memory"]["status"] == "fail" and "2002 GiB" in names["memory"]["advice"]
    (tmp_path / "lab.yaml").write_text("provider: vagrant-libvirt\ncpu: 3\n")
    res = CliRunner().invoke(cli, ["doctor"])
    assert "lab.yaml:2: field 'cpu': unknown field" in str(res.exception)


def test_up_without_profile_or_provider_says_how(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "up"])
    assert res.exit_code != 0
    assert "lab.yaml: no lab profile here" in str(res.exception)
    assert "kflab init" in str(res.exception)


@pytest.mark.parametrize("cmd", [["status"], ["ssh"], ["kubeconfig"]])
def test_lab_commands_without_a_lab(tmp_path: Path, cmd: list[str]) -> None:
    res = CliRunner().invoke(cli, ["--state", str(tmp_path), *cmd])
    assert res.exit_code != 0 and "no lab here yet" in str(res.exception)


def test_open_a_ui_without_a_lab_says_what_the_local_backend_offers(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--state", str(tmp_path), "open", "katib"])
    assert res.exit_code != 0
    assert "the local backend has no Katib UI to open" in str(res.exception)


def test_down_without_a_lab_still_stops_local_servers(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--state", str(tmp_path), "down"])
    assert res.exit_code == 0 and "stopped 0 process(es)" in res.output


def test_up_refuses_when_doctor_fails(tmp_path: Path) -> None:
    """A wsl2 lab on this (non-WSL) machine: `kflab up` stops before touching anything."""
    prof = tmp_path / "lab.yaml"
    prof.write_text("provider: wsl2\n")
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "up", "-p", str(prof)])
    assert res.exit_code != 0
    assert "this host is not ready for the lab" in str(res.exception)
    assert "kflab up --force" in str(res.exception)
    assert not (tmp_path / "s" / "labs").exists()


def test_status_reports_an_unreachable_api(tmp_path: Path) -> None:
    """`kflab status` on an existing-cluster lab whose API port is closed: a real client
    call to 127.0.0.1 fails fast and the report says so (exit 1, JSON still printed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    kube = tmp_path / "kubeconfig"
    kube.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        f"clusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:{port}', "
        "insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\n")
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: far\nkubeconfig: {kube}\ncomponents: []\n")
    state = tmp_path / "s"
    assert CliRunner().invoke(cli, ["--state", str(state), "up", "-p", str(prof)]).exit_code == 0
    res = CliRunner().invoke(cli, ["--state", str(state), "status", "--json"])
    assert res.exit_code == 1
    report = json.loads(res.output)
    assert report["vm"] == "running" and report["ready"] is False
    assert "cannot reach the Kubernetes API" in report["error"]
    assert report["api"] == f"https://127.0.0.1:{port}"


def _catalog(pinned: bool):
    """The real catalog with every pin kept (or cleared to null) — a stand-in for a
    versions.yaml in either state, so the test holds whatever the file says today."""
    import dataclasses

    from lab.components import catalog

    real = catalog.load()
    if pinned:
        return real

    def cleared(a):
        arch = {k: dataclasses.replace(f, sha256=None) for k, f in a.arch.items()}
        return dataclasses.replace(a, arch=arch, commit=None, tree=None, fingerprint=None)
    return dataclasses.replace(real, artifacts={n: cleared(a) for n, a in real.artifacts.items()})


def test_up_refuses_unpinned_downloads_before_creating_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.components import catalog

    unpinned = _catalog(pinned=False)
    monkeypatch.setattr(catalog, "load", lambda *a, **k: unpinned)
    kube = tmp_path / "kubeconfig"
    kube.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                    "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    "users: [{name: u, user: {token: t}}]\n")
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: ex\nkubeconfig: {kube}\ncomponents: [katib]\n")
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "up", "-p", str(prof)])
    assert res.exit_code != 0
    msg = str(res.exception)
    assert "has no pin for kubeflow-manifests, argo-workflows, jobset (kubeflow-manifests: " \
        "commit, tree; argo-workflows: commit, tree; jobset: commit, tree)" in msg
    assert "never installs an unverified file" in msg and "--only node" in msg
    assert "kflab components pin kubeflow-manifests argo-workflows jobset" in msg
    # nothing created or recorded: no lab.json, no kubeconfig copy (only an empty folder)
    assert not [p for p in (tmp_path / "s").rglob("*") if p.is_file()]


def test_up_refuses_a_non_tls_mirror_before_creating_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFLAB_GITHUB_URL", "http://mirror.example")
    kube = tmp_path / "kubeconfig"
    kube.write_text("apiVersion: v1\nkind: Config\n")
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: ex\nkubeconfig: {kube}\ncomponents: [katib]\n")
    res = CliRunner().invoke(cli, ["--state", str(tmp_path / "s"), "up", "-p", str(prof),
                                   "--force"])
    assert "KFLAB_GITHUB_URL: refusing 'http://mirror.example'" in str(res.exception)
    assert not [p for p in (tmp_path / "s").rglob("*") if p.is_file()]


def test_playbook_vars_carry_the_pins_in_use(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from lab.provision import runner

    prof = SimpleNamespace(name="l", provider="host", components=(), offline="", api_port=6443,
                           versions={})
    default = runner.extra_vars(prof, tmp_path / "kc", False)
    assert default["kflab_versions_file"].endswith("manifests/versions.yaml")
    # whose machine it is, and where verify.json lands (the kubeconfig's lab folder)
    assert default["kflab_provider"] == "host" and default["kflab_lab_dir"] == str(tmp_path)
    assert default["kflab_github_url"] == "https://github.com"
    moved = runner.extra_vars(prof, tmp_path / "kc", False, versions_file=tmp_path / "v.yaml",
                              github_url="http://127.0.0.1:9")
    assert moved["kflab_versions_file"] == str(tmp_path / "v.yaml")
    assert moved["kflab_github_url"] == "http://127.0.0.1:9"


def test_pinned_check_follows_the_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    from lab import lifecycle
    from lab.components import catalog
    from lab.errors import LabError

    unpinned, pinned = _catalog(pinned=False), _catalog(pinned=True)
    monkeypatch.setattr(catalog, "load", lambda *a, **k: unpinned)
    lifecycle.require_pinned(["node"])  # the node role downloads nothing
    with pytest.raises(LabError, match=r"no pin for k3s, nvidia-container-toolkit-key \(k3s: "
                       r"arch.amd64.sha256, arch.arm64.sha256; nvidia-container-toolkit-key: "
                       r"fingerprint\)"):
        lifecycle.require_pinned(["node", "k3s", "gpu"])
    monkeypatch.setattr(catalog, "load", lambda *a, **k: pinned)
    lifecycle.require_pinned(["node", "k3s", "gpu", "kubeflow", "verify"])


class _NodeProvider:
    """A provider that provisions a node and reports `gpus` (the seam, not a real machine);
    no inventory, so `up` stops before Ansible."""

    from lab.providers.base import Capabilities

    capabilities = Capabilities()
    name = "standin"

    def __init__(self, gpus: list) -> None:
        self._gpus = gpus

    def preflight(self) -> None:
        pass

    def require_tool(self) -> None:
        pass

    def create(self, profile, say) -> None:
        pass

    def gpus(self) -> list:
        return self._gpus

    def inventory(self) -> None:
        return None

    def kubeconfig(self) -> Path:
        return Path("/nonexistent/kubeconfig")


@pytest.mark.parametrize(("gpu", "found", "checked"), [
    ("auto", [], [["node", "k3s", "kubeflow", "verify"]]),  # CPU-only: no NVIDIA key needed
    ("auto", ["H100"], [["node", "k3s", "kubeflow", "verify"],
                        ["node", "k3s", "gpu", "kubeflow", "verify"]]),
    ("off", ["H100"], [["node", "k3s", "kubeflow", "verify"]]),
    (("0000:01:00.0",), ["H100"], [["node", "k3s", "gpu", "kubeflow", "verify"]] * 2),
])
def test_gpu_auto_checks_the_gpu_pins_only_after_a_gpu_is_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu, found, checked) -> None:
    """Defect 10: with `gpu: auto`, `kflab up` demanded the NVIDIA key's pin on a CPU-only
    host; the decision belongs after detection (provider.gpus())."""
    from lab import lifecycle
    from lab.config import Profile

    calls: list[list[str]] = []
    monkeypatch.setattr(lifecycle, "require_pinned", lambda roles: calls.append(list(roles)))
    monkeypatch.setattr(lifecycle, "get_provider", lambda p, s: _NodeProvider(found))
    profile = Profile(provider="vagrant-libvirt", gpu=gpu, components=("katib",))
    lifecycle.up(profile, tmp_path, lambda line: None, force=True)
    assert calls == checked


@pytest.mark.parametrize(("gpu", "found", "checked"), [
    ("auto", [], ["node", "k3s", "kubeflow", "verify"]),
    ("auto", ["H100"], ["node", "k3s", "gpu", "kubeflow", "verify"]),
])
def test_dry_run_checks_the_gpu_pins_only_where_a_gpu_is_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu, found, checked) -> None:
    """The same decision in `kflab up --dry-run` (a VM that does not exist yet)."""
    from lab import lifecycle
    from lab.config import Profile

    class _Unmade(_NodeProvider):
        def describe(self, profile) -> list[str]:
            return ["a VM (stand-in)"]

        def reachable(self) -> bool:
            return False

    calls: list[list[str]] = []
    monkeypatch.setattr(lifecycle, "require_pinned", lambda roles: calls.append(list(roles)))
    monkeypatch.setattr(lifecycle, "get_provider", lambda p, s: _Unmade(found))
    profile = Profile(provider="vagrant-libvirt", gpu=gpu, components=("katib",))
    lifecycle.preview(profile, tmp_path, lambda line: None, checks=False)
    assert calls == [checked]
