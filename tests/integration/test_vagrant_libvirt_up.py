"""A real `kflab up --provider vagrant-libvirt`: a locally built box (scripts/standins/
30-vagrant.sh), libvirt + qemu under TCG (no KVM here), the node role over SSH, testinfra,
a converging re-run, `kflab status`, then `kflab down --destroy`.

The node role is a STAND-IN (tests/integration/standin/) until the real roles are merged.
Recipe: ../shared/recipes/vagrant-libvirt-tcg.md. Takes ~6-8 minutes on a busy 2-core host
(boot under TCG ~4 min; each Ansible task ~20 s over SSH into an emulated CPU).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.backends.local.procs import kill_group, popen

BOX = "local/kflab-deb12"
STANDIN = Path(__file__).resolve().parent / "standin" / "site.yml"
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

    ssh_port, api_port = _free_port(), _free_port()
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
        up = run_kflab("up", "-p", str(prof), "--only", "node", "--playbook", str(STANDIN),
                       env=env, timeout=900)
        t_up = time.monotonic() - t0
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert "vagrant up (libvirt, 2 CPUs, 4 GiB)" in up.stdout
        assert "▶ role node" in up.stdout and f"lab {name} is up" in up.stdout
        vf = (state / "labs" / name / "vagrant" / "Vagrantfile").read_text()
        assert f"hostfwd=tcp:127.0.0.1:{ssh_port}-:22" in vf and "restrict=on" in vf

        # testinfra over SSH, with the key Vagrant put in place of the insecure one
        inv = (state / "labs" / name / "inventory.ini").read_text()
        key = inv.split("ansible_ssh_private_key_file=")[1].split()[0]
        host = testinfra.get_host(
            f"ssh://vagrant@127.0.0.1:{ssh_port}", ssh_identity_file=key, sudo=True,
            ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
        node = json.loads(host.file("/etc/kflab-node.json").content_string)
        assert node == {"lab": name, "gpu": False, "api_port": api_port}
        assert host.file("/etc/modules-load.d/kflab.conf").contains("br_netfilter")
        assert host.sysctl("net.ipv4.ip_forward") == 1
        assert host.file("/etc/rancher/k3s").is_directory
        assert host.service("ssh").is_running
        assert host.socket("tcp://0.0.0.0:22").is_listening

        # resumable: `kflab up` again finds the VM running and keeps it (no re-creation);
        # only `verify` is asked for, which the stand-in playbook lacks, so this stays cheap
        # (the playbook's own convergence is tested in test_provision_runner.py).
        again = run_kflab("up", "-p", str(prof), "--only", "verify", "--playbook",
                          str(STANDIN), env=env, timeout=600)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert "Machine already provisioned" in again.stdout or "already running" in \
            again.stdout, again.stdout[-1500:]
        assert host.file("/etc/kflab-node.json").exists  # same disk, same VM

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
