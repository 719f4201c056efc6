"""A real `kflab up --provider vagrant-libvirt`: a locally built box (scripts/standins/
30-vagrant.sh), libvirt + qemu under TCG (no KVM here), the real node role of
playbooks/site.yml over SSH, testinfra, a converging re-run, `kflab status`, then
`kflab down --destroy`.

The VM has no network (qemu user-mode NIC with restrict=on), so the box carries the node
role's packages and the role must converge without an apt mirror, as on an offline lab.
Only the node role runs: k3s, the GPU and Kubeflow need downloads or hardware and are
tested against the systemd container (test_roles_container.py) and offline.
Recipe: ../shared/recipes/vagrant-libvirt-tcg.md. Takes several minutes on a busy 2-core host
(boot under TCG; each Ansible task costs seconds over SSH into an emulated CPU).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.backends.local.procs import free_port, kill_group, popen

BOX = "local/kflab-deb12"
SOCK = Path("/var/run/libvirt/libvirt-sock")

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _why_not() -> str | None:
    for tool in ("vagrant", "libvirtd", "virtlogd", "qemu-system-x86_64", "virsh"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/standins/30-vagrant.sh installs it)"
    if os.geteuid() != 0:
        return "libvirtd (qemu:///system) needs root here"
    boxes = subprocess.run(["vagrant", "box", "list"], capture_output=True, text=True,
                           check=False).stdout
    if not any(line.startswith(BOX + " ") for line in boxes.splitlines()):
        return f"box {BOX} not built (run scripts/standins/30-vagrant.sh)"
    return None


def _results(lab_dir: Path) -> dict[str, tuple[str, bool]]:
    """Task name -> (status, changed) of the last run, from the runner's event log."""
    events = map(json.loads, (lab_dir / "ansible-events.jsonl").read_text().splitlines())
    return {e["task"]: (e["status"], e["changed"]) for e in events
            if e.get("event") == "result"}


@pytest.fixture(scope="module")
def libvirtd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """libvirtd + virtlogd started by hand (no systemd as PID 1), stopped by PID after."""
    why = _why_not()
    if why:
        pytest.skip(why)
    started = []
    if not SOCK.exists():
        logs = tmp_path_factory.mktemp("libvirt")
        for argv in (["virtlogd"], ["libvirtd"]):
            with open(logs / f"{argv[0]}.log", "wb") as fh:
                started.append(popen(argv, stdout=fh))
        deadline = time.monotonic() + 60
        while not SOCK.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        if not SOCK.exists():
            for p in started:
                kill_group(p.pid)
            pytest.fail(f"libvirtd did not start: {(logs / 'libvirtd.log').read_text()[-800:]}")
    yield
    for p in reversed(started):
        kill_group(p.pid, grace=10)
        p.wait()


def test_up_node_role_testinfra_down(libvirtd: None, tmp_path: Path, kflab) -> None:
    import testinfra

    run_kflab = kflab

    ssh_port, api_port = free_port(), free_port()
    pool = Path("/var/lib/kflab-test/libvirt/images")
    pool.mkdir(parents=True, exist_ok=True)
    name = f"kflab-it-{os.getpid() % 10000}"
    prof = tmp_path / "lab.yaml"
    prof.write_text(
        f"provider: vagrant-libvirt\nname: {name}\ncpus: 2\nmemory: 4\ndisk: 20\nbox: {BOX}\n"
        f"gpu: off\ncomponents: []\napi_port: {api_port}\n"
        "vagrant:\n  libvirt_driver: qemu\n  cpu_model: qemu64\n  network: user\n"
        f"  isolated: true\n  ssh_port: {ssh_port}\n  storage_pool_path: {pool}\n")
    state = tmp_path / "state"
    env = {"KFLAB_STATE": str(state)}
    t0 = time.monotonic()
    try:
        up = run_kflab("up", "-p", str(prof), "--only", "node", env=env, timeout=900)
        t_up = time.monotonic() - t0
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert "vagrant up (libvirt, 2 CPUs, 4 GiB)" in up.stdout
        assert "▶ role node" in up.stdout and f"lab {name} is up" in up.stdout
        # the box had every package, so the role skipped apt (the VM cannot reach a mirror);
        # the box boots with swap on, so swapoff ran
        first = _results(state / "labs" / name)
        assert first["Install the base packages that are missing"] == ("skipped", False)
        assert first["Turn swap off now (kubelet refuses to run with swap by default)"] == \
            ("ok", True)
        vf = (state / "labs" / name / "vagrant" / "Vagrantfile").read_text()
        assert f"hostfwd=tcp:127.0.0.1:{ssh_port}-:22" in vf and "restrict=on" in vf

        # testinfra over SSH, with the key Vagrant put in place of the insecure one
        inv = (state / "labs" / name / "inventory.ini").read_text()
        key = inv.split("ansible_ssh_private_key_file=")[1].split()[0]
        host = testinfra.get_host(
            f"ssh://vagrant@127.0.0.1:{ssh_port}", ssh_identity_file=key, sudo=True,
            ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
        boot_id = host.file("/proc/sys/kernel/random/boot_id").content_string
        for pkg in ("ca-certificates", "curl", "conntrack", "iptables", "socat"):
            assert host.package(pkg).is_installed, pkg
        modules = host.file("/etc/modules-load.d/kflab.conf")
        assert modules.user == "root" and modules.mode == 0o644
        assert modules.content_string.split() == ["br_netfilter", "overlay"]
        assert host.file("/sys/module/br_netfilter").is_directory  # loaded, not just listed
        sysctl_conf = host.file("/etc/sysctl.d/90-kflab.conf").content_string
        want = {"fs.inotify.max_user_instances": 1280, "fs.inotify.max_user_watches": 655360,
                "net.bridge.bridge-nf-call-iptables": 1,
                "net.bridge.bridge-nf-call-ip6tables": 1, "net.ipv4.ip_forward": 1}
        for key_, value in want.items():
            assert f"{key_} = {value}" in sysctl_conf, key_
            assert host.sysctl(key_) == value, key_  # live in the VM's kernel
        # the box boots with /swapfile on: the role turned it off and commented it out
        assert host.file("/proc/swaps").content_string.strip().splitlines()[1:] == []
        assert "# /swapfile none swap sw 0 0  # disabled by kflab" in \
            host.file("/etc/fstab").content_string
        assert host.service("ssh").is_running
        assert host.socket("tcp://0.0.0.0:22").is_listening

        # resumable and converged: `kflab up --only node` again keeps the VM (same boot)
        # and the role reports nothing changed, in the output and in the event log
        again = run_kflab("up", "-p", str(prof), "--only", "node", env=env, timeout=900)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert "Machine already provisioned" in again.stdout or "already running" in \
            again.stdout, again.stdout[-1500:]
        assert re.search(r"done on \S+: ok=\d+ changed=0 failed=0 unreachable=0",
                         again.stdout), again.stdout[-1500:]
        events = (state / "labs" / name / "ansible-events.jsonl").read_text().splitlines()
        stats = [e for e in map(json.loads, events) if e.get("event") == "stats"]
        assert _results(state / "labs" / name)["Write the sysctls"] == ("ok", False)
        assert stats and all(s["changed"] == 0 and s["ok"] > 0
                             for s in stats[-1]["hosts"].values()), stats
        assert host.file("/proc/sys/kernel/random/boot_id").content_string == boot_id

        st = run_kflab("status", "--json", env=env, timeout=120)
        report = json.loads(st.stdout)
        assert report["vm"] == "running" and report["ready"] is False  # no k3s yet
        print(f"\nkflab up (TCG, VM + node role): {t_up:.0f}s")
    finally:
        down = run_kflab("down", "--destroy", env=env, timeout=300)
        domains = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                                 capture_output=True, text=True, check=False).stdout
    assert down.returncode == 0, down.stdout + down.stderr
    assert "lab destroyed" in down.stdout
    assert name not in domains
    assert not (state / "labs" / name / "vagrant" / "Vagrantfile").exists()
