"""Deliverable 4: `kflab up --dry-run` says what will change on the target before anything
changes, and on the user's own machine `kflab up` asks first.

The node is the systemd container stand-in (tests/integration/conftest.py `target`, reached
over SSH like a VM); its state is compared before and after the dry run. The confirmation
prompt is answered in a real pseudo-terminal, with the stand-in playbook of
tests/fixtures/playbooks (it only writes into a temporary folder)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lab.config import Profile
from lab.providers.base import Inventory
from lab.provision import preview, runner
from tests.conftest import REPO, run_kflab
from tests.integration.conftest import podman

FIXTURE = REPO / "tests" / "fixtures" / "playbooks" / "site.yml"
GROUP_VARS = yaml.safe_load((REPO / "playbooks/group_vars/all/kflab.yml").read_text())
NODE_DEFAULTS = yaml.safe_load((REPO / "playbooks/roles/node/defaults/main.yml").read_text())
# What the node can show of its own state: every path, and each file's size, mode and
# mtime (a folder's mtime moves when Ansible makes its temp folder in /root/.ansible, so
# folders count by what they hold); Ansible's and sshd's own traces are left out.
SNAPSHOT = (
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp "
    "-o -path /var/tmp -o -path /var/log -o -path /root/.ansible -o -path /var/lib/systemd "
    "-o -path /var/cache \\) -prune -o -type d -printf '%p dir %m\\n' "
    "-o -printf '%p %s %m %T@\\n' | sort; "
    "dpkg-query -W; systemctl list-unit-files --no-legend; swapon --show; cat /etc/fstab")


def _snapshot(name: str) -> list[str]:
    return podman("exec", name, "sh", "-c", SNAPSHOT, timeout=120).stdout.splitlines()


def test_dry_run_on_the_node_changes_nothing_and_lists_the_changes(target: dict,
                                                                   tmp_path: Path) -> None:
    profile = Profile(provider="vagrant-libvirt", name="dry")  # the container plays the VM
    extra = runner.extra_vars(profile, tmp_path / "kubeconfig", gpu=False)
    plan = runner.Plan(
        inventory=Inventory(connection="ssh", host="127.0.0.1", port=target["port"],
                            user="root", key=target["key"], become=False,
                            ssh_args=("-o StrictHostKeyChecking=no",
                                      "-o UserKnownHostsFile=/dev/null")),
        extra_vars=extra, tags=["node"], workdir=tmp_path / "work", host_name="dry")
    before = _snapshot(target["name"])
    shown = preview.Preview("dry", profile.provider, "the test node")
    shown.roles = ["node"]
    shown.changes = preview.static_changes(runner.PLAYBOOK, ["node"], extra)
    preview.check(plan, shown)
    after = _snapshot(target["name"])
    assert after == before, "\n".join(sorted(set(after) ^ set(before)))

    assert shown.checked, shown.check_note
    text = "\n".join(shown.render())
    by_target = {c.target: c for c in shown.changes}
    # the sysctl file, with every value the role writes, seen by check mode as new
    sysctl = next(c for c in shown.changes if c.target.startswith("/etc/sysctl.d/"))
    assert sysctl.status == "change"
    for key, value in GROUP_VARS["kflab_sysctls"].items():
        assert f"+{key} = {value}" in sysctl.detail, key
    modules = next(c for c in shown.changes if c.target.startswith("/etc/modules-load.d/"))
    assert modules.status == "change"
    assert [f"+{m}" for m in GROUP_VARS["kflab_kernel_modules"]] == \
        [d for d in modules.detail if d.startswith("+") and not d.startswith("+++")]
    # the swap line the container's fstab carries: commented out, shown as a diff
    assert by_target["/etc/fstab"].status == "change"
    assert any(d.startswith("-/swapfile") for d in by_target["/etc/fstab"].detail)
    # packages: by name from apt's own simulation where the node has python3-apt; a minimal
    # node lacks it, then check mode says it cannot tell and the candidates are listed
    pkgs = next(c for c in shown.changes if c.kind == "package")
    installed = {ln.split("\t")[0] for ln in podman(
        "exec", target["name"], "dpkg-query", "-W", "--showformat=${Package}\t${Status}\n"
    ).stdout.splitlines() if ln.endswith("install ok installed")}
    missing = set(NODE_DEFAULTS["node_packages"]) - installed
    if "python3-apt" not in installed:
        assert pkgs.status == "unknown" and "python3-apt" in pkgs.note, pkgs
        assert any(" ".join(NODE_DEFAULTS["node_packages"]) in d.replace(",", "")
                   for d in pkgs.detail), pkgs.detail
        assert "? check can't tell" in text
    elif missing:
        assert pkgs.status == "change" and set(pkgs.target.split()) >= missing, pkgs
    else:
        assert pkgs.status == "ok"
    assert "will change" in text and "roles: node (checked on the target" in text


def test_static_preview_of_the_whole_lab_for_a_vm_not_yet_created(tmp_path: Path) -> None:
    """No node yet: every role's changes are listed from the role files, marked as such."""
    profile = Profile(provider="vagrant-libvirt", name="later")
    extra = runner.extra_vars(profile, tmp_path / "kubeconfig", gpu=False)
    changes = preview.static_changes(runner.PLAYBOOK, ["node", "k3s", "kubeflow", "verify"],
                                     extra)
    roles = {c.role for c in changes}
    assert {"node", "k3s", "kubeflow"} <= roles
    assert all(c.status == "planned" for c in changes)
    targets = " ".join(c.target for c in changes)
    assert "/usr/local/bin/k3s" in targets and "/etc/systemd/system/k3s.service" in targets
    assert any(c.kind == "service" and c.target == "k3s" for c in changes)
    sysctl = next(c for c in changes if c.target.startswith("/etc/sysctl.d/"))
    for key in GROUP_VARS["kflab_sysctls"]:
        assert any(d.startswith(key) for d in sysctl.detail), key


def test_dry_run_cli_for_a_vm_lab_without_vagrant(tmp_path: Path) -> None:
    prof = tmp_path / "lab.yaml"
    prof.write_text("provider: vagrant-libvirt\nname: dr\ngpu: off\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / "state"
    res = run_kflab("up", "--dry-run", "-p", str(prof),
                    env={"PATH": f"{bindir}:{Path(sys.executable).parent}",
                         "KFLAB_STATE": str(state)}, timeout=300)
    assert res.returncode == 2, res.stderr  # kflab up would stop: not a success
    assert "Traceback" not in res.stderr
    out = res.stdout
    assert "kflab up would stop here: vagrant is not installed" in out
    assert "NOT checked on the target" in out and "node does not exist yet" in out
    assert "/etc/sysctl.d/" in out and "nothing was changed (dry run)" in out
    assert not list(state.glob("labs/*/lab.json"))


def _host_profile(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    out.mkdir()
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: host\nname: mine\ncomponents: [katib]\noffline: {out}\n")
    return prof, out


def _pty_run(argv: list[str], answer: str, env: dict[str, str], timeout: float = 300
             ) -> tuple[int, str]:
    """Run argv on a pseudo-terminal; answer the first confirmation prompt."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a real terminal on stdin/stdout/stderr
        os.execve(sys.executable, [sys.executable, *argv], env)
    out, answered, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            if not answered and b"[y/N]" in out:
                os.write(fd, answer.encode() + b"\r")
                answered = True
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@pytest.mark.skipif(os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"],
                    capture_output=True, check=False).returncode != 0,
                    reason="the host provider needs root or passwordless sudo")
def test_host_up_asks_before_changing_this_machine(tmp_path: Path) -> None:
    prof, out = _host_profile(tmp_path)
    env = {**os.environ, "KFLAB_STATE": str(tmp_path / "state"), "PYTHONPATH": str(REPO),
           "COLUMNS": "200"}
    argv = ["-m", "lab.cli", "up", "-p", str(prof), "--force", "--playbook", str(FIXTURE)]

    code, text = _pty_run(argv, "n", env)
    assert "Apply these changes to this machine? [y/N]" in text, text
    assert f"will change    file {out}/node/name" in text  # seen by check mode, listed
    assert "on this machine:" in text
    assert code == 2 and "nothing was changed" in text
    assert not (out / "node").exists() and not (out / "components").exists()

    code, text = _pty_run(argv, "y", env)
    assert code == 0, text
    assert (out / "node" / "name").read_text() == "mine\n"


def test_host_up_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    prof, out = _host_profile(tmp_path)
    env = {"KFLAB_STATE": str(tmp_path / "state")}
    argv = ["up", "-p", str(prof), "--force", "--playbook", str(FIXTURE)]
    res = subprocess.run([sys.executable, "-m", "lab.cli", *argv], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, **env, "PYTHONPATH": str(REPO)})
    assert res.returncode == 2
    assert "changes this machine itself" in res.stderr and "--yes" in res.stderr
    assert not list(out.iterdir())
    if os.geteuid() == 0:
        res = run_kflab(*argv, "--yes", env=env)
        assert res.returncode == 0, res.stderr
        assert (out / "node" / "name").exists()


def test_dry_run_for_an_existing_cluster_touches_nothing(tmp_path: Path) -> None:
    """provider existing: no node; the components' roles listed; not even kflab's own copy of
    the kubeconfig is written by a dry run."""
    kube = tmp_path / "user-kubeconfig"
    kube.write_text("apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                    "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    "users: [{name: u, user: {token: t}}]\n")
    prof = tmp_path / "lab.yaml"
    prof.write_text(f"provider: existing\nname: far\nkubeconfig: {kube}\ncomponents: [katib]\n")
    state = tmp_path / "state"
    res = run_kflab("up", "--dry-run", "-p", str(prof), env={"KFLAB_STATE": str(state)})
    assert res.returncode == 0, res.stderr
    assert f"copies context (current) of {kube}" in res.stdout
    assert "roles: kubeflow, verify (NOT checked" in res.stdout
    assert "kubeflow:" in res.stdout
    assert not (state / "labs" / "far" / "kubeconfig").exists()
    assert not list(state.glob("labs/*/lab.json"))
