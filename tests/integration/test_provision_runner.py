"""The Ansible runner against a real ansible-playbook (local connection) and a tiny
stand-in playbook with the same contract as playbooks/site.yml (tests/fixtures/playbooks)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import config
from lab.cli import cli
from lab.config import Profile
from lab.errors import LabError
from lab.providers.base import Inventory
from lab.provision import runner

PLAYBOOK = Path(__file__).resolve().parents[1] / "fixtures" / "playbooks" / "site.yml"


def _plan(tmp_path: Path, tags: list[str]) -> runner.Plan:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    profile = Profile(provider="host", name="t1", offline=str(out))
    return runner.Plan(inventory=Inventory(connection="local", host="localhost", become=False),
                       extra_vars=runner.extra_vars(profile, tmp_path / "kc", gpu=False),
                       tags=tags, workdir=tmp_path / "work", playbook=PLAYBOOK, host_name="t1")


def test_run_streams_events_and_converges(tmp_path: Path) -> None:
    plan = _plan(tmp_path, ["node", "k3s", "kubeflow", "verify"])
    tasks = runner.list_tasks(plan)
    assert ("node", "Create the node's marker folder") in tasks
    assert len(tasks) == 9
    lines: list[str] = []
    events: list[dict] = []
    view = runner.ProgressView(tasks, plan.tags, lines.append)

    def sink(ev: dict) -> None:
        events.append(ev)
        view(ev)

    first = runner.run(plan, sink)
    assert first.ok, first.failed
    assert (tmp_path / "out" / "node" / "name").read_text() == "t1\n"
    # the profile's default: every component, in the catalog's install order
    assert (tmp_path / "out" / "components").read_text() == ",".join(config.COMPONENTS) + "\n"
    # cert-manager first: KServe's and Katib's webhooks need its certificates
    assert config.COMPONENTS[0] == "cert-manager"
    assert set(config.COMPONENTS) == {"cert-manager", "pipelines", "katib", "training-operator",
                                      "trainer", "kserve", "notebooks"}
    assert stat.S_IMODE((tmp_path / "kc").stat().st_mode) == 0o600
    started = [e["task"] for e in events if e["event"] == "task"]
    assert started[0] == "Create the node's marker folder"
    assert any(ln.strip().startswith("▶ role k3s") or "▶ role k3s" in ln for ln in lines)
    assert any("(then: kubeflow, verify)" in ln for ln in lines)
    assert first.stats["t1"]["changed"] >= 3
    assert first.log.read_text().count("TASK [") >= 6  # the full log has Ansible's output

    second = runner.run(plan, lambda ev: None)  # re-running converges: nothing changes
    assert second.ok
    assert second.stats["t1"]["changed"] == 0


def test_tags_select_roles(tmp_path: Path) -> None:
    plan = _plan(tmp_path, ["node"])
    out = runner.run(plan, lambda ev: None)
    assert out.ok
    assert (tmp_path / "out" / "node" / "name").exists()
    assert not (tmp_path / "out" / "components").exists()


def test_failure_names_task_and_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFLAB_TEST_FAIL", "boom")
    plan = _plan(tmp_path, ["kubeflow"])
    out = runner.run(plan, lambda ev: None)
    assert not out.ok
    err = runner.failure_error(out)
    assert "task 'kubeflow : Fail on request' failed on t1" in str(err)
    assert "stand-in failure: boom" in str(err)
    assert str(out.log) in str(err)


def test_tags_for() -> None:
    assert runner.tags_for(True, False, ("pipelines",)) == ["node", "k3s", "kubeflow", "verify"]
    assert runner.tags_for(True, True, ()) == ["node", "k3s", "gpu"]
    assert runner.tags_for(False, False, ()) == []
    assert runner.tags_for(True, True, ("katib",), only=["verify", "node"]) == ["node", "verify"]
    with pytest.raises(LabError, match="unknown role nod"):
        runner.tags_for(True, False, (), only=["nod"])


def test_kflab_up_existing_cluster_runs_only_kubeflow_roles(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """`kflab up` end to end with provider existing: no node roles, a private kubeconfig
    copy, then kubeflow + verify; a failed run names the task, a re-run converges."""
    kube = tmp_path / "user-kubeconfig"
    kube.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "contexts:\n- name: a\n  context: {cluster: ca, user: ua}\n"
        "- name: b\n  context: {cluster: cb, user: ub}\n"
        "clusters:\n- name: ca\n  cluster: {server: 'https://127.0.0.1:1', "
        "certificate-authority: ca.crt}\n- name: cb\n  cluster: {server: 'https://127.0.0.1:2'}\n"
        "users:\n- name: ua\n  user: {token: secret-a}\n- name: ub\n  user: {token: secret-b}\n")
    out = tmp_path / "offline"
    out.mkdir()
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: ex\nkubeconfig: {kube}\ncontext: b\n"
                    f"components: [katib]\noffline: {out}\n")
    state = tmp_path / "state"
    monkeypatch.setenv("KFLAB_TEST_FAIL", "first run")
    res = CliRunner().invoke(cli, ["--state", str(state), "up", "-p", str(prof),
                                   "--playbook", str(PLAYBOOK)])
    assert res.exit_code != 0
    assert "task 'kubeflow : Fail on request' failed on ex" in str(res.exception)
    monkeypatch.delenv("KFLAB_TEST_FAIL")
    res = CliRunner().invoke(cli, ["--state", str(state), "up", "-p", str(prof),
                                   "--playbook", str(PLAYBOOK)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "role kubeflow" in res.output and "role node" not in res.output
    assert (out / "components").read_text() == "katib\n"
    kc = state / "labs" / "ex" / "kubeconfig"
    assert stat.S_IMODE(kc.stat().st_mode) == 0o600
    text = kc.read_text()
    assert "secret-b" in text and "secret-a" not in text  # only the chosen context
    rec = json.loads((state / "labs" / "ex" / "lab.json").read_text())
    assert rec["phase"] == "ready" and rec["tags"] == ["kubeflow", "verify"]
    # kflab kubeconfig -o writes a 0600 copy, whatever the umask
    old = os.umask(0)
    try:
        dest = tmp_path / "kc-copy"
        res = CliRunner().invoke(cli, ["--state", str(state), "kubeconfig", "-o", str(dest)])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600 and dest.read_text() == text
    res = CliRunner().invoke(cli, ["--state", str(state), "down", "--destroy"])
    assert res.exit_code == 0 and "lab destroyed" in res.output
    assert not kc.exists() and kube.exists()  # the user's own file is untouched
