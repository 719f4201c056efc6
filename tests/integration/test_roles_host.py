"""The roles on a user's own machine (provider host / wsl2) and the GPU decisions, for real,
against the systemd container (podman + runc) reached over SSH:

- the k3s role after its download (tasks/install.yml) with a user's own kubectl already in
  /usr/local/bin: the user's file is kept, the free names are linked; k3s listens on the
  profile's api_port (https-listen-port) and the kubeconfig says so; a second run changes
  nothing; kflab's uninstall script then removes everything the roles put there and keeps
  the user's kubectl;
- the node role leaves a user's swap alone;
- the gpu role's default-runtime drop-in reaches k3s's configuration;
- the gpu role finds a WSL 2 GPU by /dev/dxg and /usr/lib/wsl/lib (stand-ins), and a VM's
  passed-through GPU (a stand-in PCI tree) leads to the driver install, whose Debian
  non-free sources are written and whose pinned version apt really offers.

STAND-INS (what cannot exist here): the k3s binary (tests/fixtures/standin-k3s/k3s: no GitHub),
WSL's /dev/dxg, libcuda and nvidia-smi, and a PCI device of vendor 0x10de. The driver itself is
never installed here (no GPU, and the container's kernel is the host's): apt only simulates
the pinned install.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.ansible_helpers import PLAYBOOKS, REPO, run_playbook
from tests.integration.conftest import CONF, podman

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STANDIN_K3S = REPO / "tests" / "fixtures" / "standin-k3s" / "k3s"
USER_KUBECTL = "#!/bin/sh\necho \"the user's own kubectl\"\n"
GROUP_VARS = PLAYBOOKS / "group_vars" / "all" / "kflab.yml"
# Where kflab's roles write on a node: after the uninstall script, none of it may be left.
WATCHED = ["/etc/systemd/system", "/etc/rancher", "/etc/sysctl.d", "/etc/modules-load.d",
           "/usr/local/bin", "/var/lib/rancher", "/var/lib/kflab", "/var/lib/kubelet",
           "/run/k3s", "/etc/ld.so.conf.d"]


def play(tmp: Path, name: str, tasks: str, *, roles: str = "") -> Path:
    """A play over group `lab` with the playbooks' own group_vars (the runner's defaults)."""
    path = tmp / f"{name}.yml"
    path.write_text(f"""
- name: {name}
  hosts: lab
  become: true
  gather_facts: true
  vars_files: ["{GROUP_VARS}"]
  roles: [{roles}]
  tasks:
{tasks}
""")
    return path


def host_vars(tmp: Path, **extra) -> dict:
    return {"kflab_provider": "host", "kflab_api_port": 16443,
            "kflab_kubeconfig_dest": str(tmp / "lab" / "kubeconfig"),
            "kflab_versions_file": str(REPO / "manifests" / "versions.yaml"),
            "kflab_overlays_dir": str(REPO / "manifests" / "overlays"), **extra}


def sh(target: dict, script: str, check: bool = True) -> subprocess.CompletedProcess:
    return podman("exec", target["name"], "sh", "-c", script, check=check)


def snapshot(target: dict) -> set[str]:
    out = sh(target, "find " + " ".join(WATCHED) + " 2>/dev/null; true").stdout
    return set(out.split())


@pytest.fixture(scope="module")
def host_node(target) -> dict:
    """node role + k3s install (stand-in binary) on a machine that has its own kubectl."""
    tmp = target["tmp"]
    env = {**os.environ, "CONTAINERS_CONF": str(CONF)}
    subprocess.run(["podman", "exec", "-i", target["name"], "sh", "-c",
                    "cat > /usr/local/bin/kubectl && chmod 755 /usr/local/bin/kubectl"],
                   input=USER_KUBECTL, text=True, check=True, env=env)
    target["before"] = snapshot(target)
    podman("cp", str(STANDIN_K3S), f"{target['name']}:/usr/local/bin/k3s")
    sh(target, "chmod 755 /usr/local/bin/k3s")
    book = play(tmp, "host-k3s", """
    - name: The k3s role after its download
      ansible.builtin.import_role:
        name: k3s
        tasks_from: install
""", roles="node")
    first = run_playbook(book, target["inventory"], host_vars(tmp), tmp)
    assert first.rc == 0, first.output[-4000:]
    target["first"], target["book"] = first, book
    return target


def test_second_run_changes_nothing(host_node):
    assert host_node["first"].recap("kflab-node")["changed"] > 0
    again = run_playbook(host_node["book"], host_node["inventory"], host_vars(host_node["tmp"]),
                         host_node["tmp"])
    assert again.rc == 0, again.output[-4000:]
    assert again.recap("kflab-node")["changed"] == 0, again.output[-4000:]


def test_users_kubectl_kept_and_free_names_linked(host_node):
    """Defect 5: the role failed with "refusing to convert from file to symlink"."""
    assert sh(host_node, "cat /usr/local/bin/kubectl").stdout == USER_KUBECTL
    for name in ("crictl", "ctr"):
        assert sh(host_node, f"readlink /usr/local/bin/{name}").stdout.strip() == \
            "/usr/local/bin/k3s"
    assert "/usr/local/bin/kubectl is not ours (a file): left alone" in \
        host_node["first"].output


def test_k3s_listens_on_the_profile_api_port(host_node):
    """Defect 10: api_port other than 6443 on host/WSL2 pointed the kubeconfig at a port k3s
    did not listen on."""
    record = json.loads(sh(host_node, "cat /run/k3s-standin.json").stdout)
    assert record["config"]["https-listen-port"] == "16443"
    assert sh(host_node, "systemctl is-active k3s", check=False).stdout.strip() == "active"
    kubeconfig = host_node["tmp"] / "lab" / "kubeconfig"
    assert (kubeconfig.stat().st_mode & 0o777) == 0o600
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    assert server == "https://127.0.0.1:16443"


def test_a_vm_keeps_6443_inside(target, tmp_path):
    """On a VM the controller's api_port is forwarded to 6443 in the guest."""
    out = tmp_path / "out"
    book = play(tmp_path, "vm-port", f"""
    - name: Render the k3s config as the role does
      ansible.builtin.template:
        src: "{PLAYBOOKS}/roles/k3s/templates/config.yaml.j2"
        dest: /tmp/k3s-config-vm.yaml
        mode: "0600"
      vars:
        k3s_disable: [traefik]
    - name: Bring it back
      ansible.builtin.fetch:
        src: /tmp/k3s-config-vm.yaml
        dest: "{out}"
        flat: true
""")
    result = run_playbook(book, target["inventory"],
                          host_vars(tmp_path, kflab_provider="vagrant-libvirt"), tmp_path)
    assert result.rc == 0, result.output[-3000:]
    assert yaml.safe_load(out.read_text())["https-listen-port"] == 6443


def test_host_swap_left_alone(host_node):
    """Defect 10: swap was disabled permanently on a user's own machine."""
    fstab = sh(host_node, "cat /etc/fstab").stdout
    assert "/swapfile none swap sw 0 0" in fstab.splitlines()
    assert "disabled by kflab" not in fstab
    assert sh(host_node, "dpkg -s cloud-guest-utils", check=False).returncode != 0


def test_gpu_default_runtime_dropin_reaches_k3s(host_node):
    """Defect 4: GPU pods got no CUDA (runc stayed the default). The gpu role's drop-in makes
    `nvidia` containerd's default runtime; k3s (stand-in) reads it after a restart."""
    tmp = host_node["tmp"]
    book = play(tmp, "gpu-dropin", """
    - name: The drop-in tasks of the gpu role
      ansible.builtin.include_role:
        name: gpu
        tasks_from: runtime
""")
    result = run_playbook(book, host_node["inventory"], host_vars(tmp, gpu_platform="pci"), tmp)
    assert result.rc == 0, result.output[-3000:]
    record = json.loads(sh(host_node, "cat /run/k3s-standin.json").stdout)
    assert record["config"]["default-runtime"] == "nvidia"
    assert "/etc/rancher/k3s/config.yaml.d/50-kflab-gpu.yaml" in record["files"]
    again = run_playbook(book, host_node["inventory"], host_vars(tmp, gpu_platform="pci"), tmp)
    assert again.rc == 0 and again.recap("kflab-node")["changed"] == 0, again.output[-3000:]


def test_uninstall_removes_what_kflab_made_and_keeps_the_users_kubectl(host_node):
    """Defect 9: `kflab down --destroy` called k3s-uninstall.sh, which nothing installed."""
    script = "/usr/local/bin/kflab-uninstall.sh"
    assert sh(host_node, f"stat -c %a {script}").stdout.strip() == "755"
    # what a running k3s leaves (pod IPs of its CNI network cbr0, kubelet's pod folders) next
    # to another CNI user's state (podman), which must stay
    sh(host_node, "mkdir -p /var/lib/cni/networks/cbr0 /var/lib/cni/networks/podman "
                  "/var/lib/kubelet/pods/x && touch /var/lib/cni/networks/cbr0/10.42.0.5 "
                  "/var/lib/cni/networks/podman/10.88.0.2")
    run = sh(host_node, script, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sh(host_node, "ls /var/lib/cni/networks").stdout.split() == ["podman"]
    sh(host_node, "rm -rf /var/lib/cni")
    assert sh(host_node, "systemctl is-active k3s", check=False).stdout.strip() != "active"
    assert sh(host_node, "pgrep -f '[k]3s server'", check=False).returncode != 0
    assert sh(host_node, "cat /usr/local/bin/kubectl").stdout == USER_KUBECTL
    left = snapshot(host_node) - host_node["before"]
    assert left == set(), sorted(left)


# -- GPU detection ------------------------------------------------------------------------
DETECT = """
    - name: The gpu role's detection
      ansible.builtin.include_role:
        name: gpu
        tasks_from: detect
    - name: Report the decision
      ansible.builtin.debug:
        msg: "DECISION {{ {'platform': gpu_platform, 'enabled': gpu_enabled | bool,
               'driver_ok': gpu_driver_ok | bool, 'install_driver': gpu_install_driver | bool}
               | to_json }}"
"""


def decision(output: str) -> dict:
    line = next(ln for ln in output.splitlines() if "DECISION " in ln)
    return json.loads(line.split("DECISION ", 1)[1].rstrip('"').replace('\\"', '"'))


def test_wsl2_gpu_found_by_dxg_and_wsl_lib(target, tmp_path):
    """Defect 3: WSL 2 has no PCI vendor 0x10de and no /proc/driver/nvidia."""
    sh(target, "mknod /dev/dxg c 10 63 && mkdir -p /usr/lib/wsl/lib && "
               "touch /usr/lib/wsl/lib/libcuda.so.1 && "
               "printf '#!/bin/sh\\necho \"GPU 0: NVIDIA RTX (stand-in)\"\\n' "
               "> /usr/lib/wsl/lib/nvidia-smi && chmod 755 /usr/lib/wsl/lib/nvidia-smi")
    try:
        book = play(tmp_path, "wsl-detect", DETECT)
        vars_ = host_vars(tmp_path, kflab_provider="wsl2", kflab_gpu=True)
        found = run_playbook(book, target["inventory"], vars_, tmp_path)
        assert found.rc == 0, found.output[-3000:]
        assert decision(found.output) == {"platform": "wsl2", "enabled": True,
                                          "driver_ok": True, "install_driver": False}
        # Windows' driver missing: nvidia-smi fails -> a stop with advice, never a Linux driver
        sh(target, "printf '#!/bin/sh\\necho NVML init failed >&2; exit 9\\n' "
                   "> /usr/lib/wsl/lib/nvidia-smi")
        broken = run_playbook(book, target["inventory"], vars_, tmp_path)
        assert broken.rc != 0
        assert "The driver is Windows' own" in broken.output
        assert "NVML init failed" in broken.output
    finally:
        sh(target, "rm -rf /dev/dxg /usr/lib/wsl")
    gone = run_playbook(book, target["inventory"], vars_, tmp_path)
    assert gone.rc == 0 and decision(gone.output)["platform"] == "none"
    assert "GPU setup skipped: no NVIDIA GPU found on this node" in gone.output


def test_vm_gpu_without_driver_installs_one_host_gpu_stops(target, tmp_path):
    """Defect 7, decision: a passed-through GPU in a kflab VM gets the pinned driver; on a
    user's own machine the role stops with advice instead."""
    sh(target, "mkdir -p /tmp/pci/0000:06:00.0 && echo 0x10de > /tmp/pci/0000:06:00.0/vendor")
    try:
        book = play(tmp_path, "pci-detect", DETECT)
        pci = {"gpu_pci_root": "/tmp/pci", "kflab_gpu": True}
        vm = run_playbook(book, target["inventory"],
                          host_vars(tmp_path, kflab_provider="vagrant-libvirt", **pci), tmp_path)
        assert vm.rc == 0, vm.output[-3000:]
        assert decision(vm.output) == {"platform": "pci", "enabled": True, "driver_ok": False,
                                       "install_driver": True}
        host = run_playbook(book, target["inventory"], host_vars(tmp_path, **pci), tmp_path)
        assert host.rc != 0 and "kflab installs drivers only inside its own VMs" in host.output
    finally:
        sh(target, "rm -rf /tmp/pci")


def test_vm_driver_sources_offer_the_pinned_version(target, tmp_path):
    """Defect 7, sources: Debian's non-free components are added (signed by Debian's archive
    key) and apt offers a build of the pinned driver branch, the newest of which is picked
    and kept by an apt preference; its install resolves (simulated: no GPU, no DKMS build, no
    reboot here). A branch that is gone stops with apt's versions."""
    book = play(tmp_path, "driver-sources", """
    - name: The driver's sources and pin check
      ansible.builtin.include_role:
        name: gpu
        tasks_from: driver_sources
""")
    vars_ = host_vars(tmp_path, kflab_provider="vagrant-libvirt")
    result = run_playbook(book, target["inventory"], vars_, tmp_path, timeout=900)
    assert result.rc == 0, result.output[-3000:]
    sources = sh(target, "cat /etc/apt/sources.list.d/kflab-nonfree.sources").stdout
    assert "Components: contrib non-free non-free-firmware" in sources
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in sources
    assert "Suites: bookworm bookworm-updates" in sources
    branch = str(yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())[
        "packages"]["nvidia-driver"]["bookworm"])
    offered = [ln.split("|")[1].strip() for ln in
               sh(target, "apt-cache madison nvidia-driver").stdout.splitlines() if "|" in ln]
    pinned = next(v for v in offered if v.startswith(branch + "."))  # the newest of the branch
    prefs = sh(target, "cat /etc/apt/preferences.d/kflab-nvidia-driver").stdout
    assert f"Pin: version {branch}.*" in prefs and "Pin-Priority: 1001" in prefs
    names = yaml.safe_load((PLAYBOOKS / "roles" / "gpu" / "defaults" / "main.yml").read_text())[
        "gpu_driver_names"]
    sim = sh(target, "apt-get install -s -q linux-headers-amd64 " +
             " ".join(f"{n}={pinned}" for n in names), check=False)
    assert sim.returncode == 0, sim.stdout[-2000:] + sim.stderr[-2000:]
    for name in names:
        assert f"Inst {name} ({pinned}" in sim.stdout, name
    assert "xserver" not in sim.stdout  # headless: no X server in a lab VM
    again = run_playbook(book, target["inventory"], vars_, tmp_path, timeout=900)
    assert again.rc == 0 and again.recap("kflab-node")["changed"] == 0, again.output[-3000:]
    bad = tmp_path / "versions.yaml"
    doc = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    doc["packages"]["nvidia-driver"]["bookworm"] = "1"
    bad.write_text(yaml.safe_dump(doc))
    gone = run_playbook(book, target["inventory"], {**vars_, "kflab_versions_file": str(bad)},
                        tmp_path, timeout=900)
    assert gone.rc != 0 and "no nvidia-driver of branch 1 " in gone.output
    assert pinned in gone.output


def test_vm_driver_install_logic_in_check_mode(target, tmp_path):
    """Defect 7, install: the whole driver.yml in --check on the container (after the sources
    test above wrote the archive): the kernel packages DKMS needs are chosen and apt
    simulates the pinned install; the reboot and nvidia-smi do not run in check mode. What
    never ran anywhere: the real install, the DKMS build, the reboot, nvidia-smi on a GPU."""
    book = play(tmp_path, "driver-check", """
    - name: The driver install
      ansible.builtin.include_role:
        name: gpu
        tasks_from: driver
""")
    result = run_playbook(book, target["inventory"],
                          host_vars(tmp_path, kflab_provider="vagrant-libvirt"), tmp_path,
                          "--check", timeout=900)
    assert result.rc == 0, result.output[-3000:]
    assert "TASK [gpu : Install the kernel headers and the NVIDIA driver (pinned)]" in \
        result.output
    assert "Reboot to load the driver" in result.output
