"""A real `kflab up --provider vagrant-libvirt`: a locally built box (scripts/standins/
30-vagrant.sh), libvirt + qemu under TCG (no KVM here), the real roles of playbooks/site.yml
over SSH, testinfra, a converging re-run, `kflab status`, then `kflab down --destroy`. One VM
for the whole module (booting one under TCG costs minutes).

The VM has no network (qemu user-mode NIC with restrict=on), so the box carries the node
role's packages and the role must converge without an apt mirror, as on an offline lab.
Then `kflab up --only k3s` on the same VM reaches the k3s role's download step:
- REAL: kflab up, the k3s role, manifests/versions.yaml's pinned version, URLs and sha256
  (v1.34.2+k3s1, amd64), the checksum cross-check and the sha256 check, run inside the VM.
- STAND-IN: the artifact server. github.com cannot be reached here, so KFLAB_GITHUB_URL points
  the role at a loopback http server on this host (127.0.0.1, a free port) serving a stand-in
  k3s (a shell script that answers --version like k3s) and a stand-in sha256sum-amd64.txt.
  The VM reaches it through an SSH reverse forward bound to the VM's own loopback (the only
  way in or out of the restricted NIC besides SSH).
With the real pins, the cross-check passes (the stand-in checksum file lists the real value)
and the stand-in bytes are refused by sha256. With a versions file that pins the stand-in's
sha256 (KFLAB_VERSIONS_FILE), the binary installs, `k3s --version` names the pinned version,
and the role stops at starting k3s: the stand-in cannot run a cluster (nor could k3s here).
Then `kflab box build --lab` bakes that VM into a box (from a stand-in bundle), and ONE
second VM boots from the box with `kflab up` (lab.yaml `vagrant: box:`): the module's only
other boot, with nothing downloaded (its test's docstring says what "ready" means here).
Recipe: ../shared/recipes/vagrant-libvirt-tcg.md. Takes several minutes on a busy 2-core host
(boot under TCG; each Ansible task costs seconds over SSH into an emulated CPU).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab.backends.local.procs import free_port, kill_group, popen
from tests.artifact_server import K3S_RELEASE, K3S_VERSION, k3s_standin, serve, sha256, sums
from tests.conftest import REPO, run_kflab

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


def _answers(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as client:
        try:
            client.connect(str(sock))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def libvirtd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """libvirtd + virtlogd started by hand (no systemd as PID 1), stopped by PID after."""
    why = _why_not()
    if why:
        pytest.skip(why)
    started = []
    if not _answers(SOCK):  # none running (a socket file left by a killed one answers nothing)
        logs = tmp_path_factory.mktemp("libvirt")
        for argv in (["virtlogd"], ["libvirtd"]):
            with open(logs / f"{argv[0]}.log", "wb") as fh:
                started.append(popen(argv, stdout=fh))
        deadline = time.monotonic() + 60
        while not _answers(SOCK) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not _answers(SOCK):
            for p in started:
                kill_group(p.pid)
            pytest.fail(f"libvirtd did not start: {(logs / 'libvirtd.log').read_text()[-800:]}")
    yield
    for p in reversed(started):
        kill_group(p.pid, grace=10)
        p.wait()


@pytest.fixture(scope="module")
def vm(libvirtd: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`kflab up --only node` on a fresh VM; `kflab down --destroy` after the module (the last
    test does it and checks it; this only cleans up when a test failed before)."""
    tmp = tmp_path_factory.mktemp("vagrant-up")
    ssh_port, api_port = free_port(), free_port()
    pool = Path("/var/lib/kflab-test/libvirt/images")
    pool.mkdir(parents=True, exist_ok=True)
    name = f"kflab-it-{os.getpid() % 10000}"
    prof = tmp / "lab.yaml"
    prof.write_text(
        f"provider: vagrant-libvirt\nname: {name}\ncpus: 2\nmemory: 4\ndisk: 20\nbox: {BOX}\n"
        f"gpu: off\ncomponents: []\napi_port: {api_port}\n"
        "vagrant:\n  libvirt_driver: qemu\n  cpu_model: qemu64\n  network: user\n"
        f"  isolated: true\n  ssh_port: {ssh_port}\n  storage_pool_path: {pool}\n")
    state = tmp / "state"
    env = {"KFLAB_STATE": str(state)}
    info = {"name": name, "prof": prof, "state": state, "env": env, "ssh_port": ssh_port,
            "tmp": tmp, "lab": state / "labs" / name}
    try:  # a timeout in `up` itself must not leave the VM behind either
        t0 = time.monotonic()
        info["up"] = run_kflab("up", "-p", str(prof), "--only", "node", env=env, timeout=900)
        info["t_up"] = time.monotonic() - t0
        yield info
    finally:
        if (info["lab"] / "lab.json").exists():
            run_kflab("down", "--destroy", env=env, timeout=300)


def _host(vm: dict):
    import testinfra

    inv = (vm["lab"] / "inventory.ini").read_text()
    key = inv.split("ansible_ssh_private_key_file=")[1].split()[0]
    return key, testinfra.get_host(
        f"ssh://vagrant@127.0.0.1:{vm['ssh_port']}", ssh_identity_file=key, sudo=True,
        ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")


def test_up_node_role_testinfra_converges(vm: dict) -> None:
    up, name = vm["up"], vm["name"]
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    assert "vagrant up (libvirt, 2 CPUs, 4 GiB)" in up.stdout
    assert "▶ role node" in up.stdout and f"lab {name} is up" in up.stdout
    # the box had every package, so the role skipped apt (the VM cannot reach a mirror);
    # the box boots with swap on, so swapoff ran
    first = _results(vm["lab"])
    assert first["Install the base packages that are missing"] == ("skipped", False)
    assert first["Turn swap off now (kubelet refuses to run with swap by default)"] == \
        ("ok", True)
    vf = (vm["lab"] / "vagrant" / "Vagrantfile").read_text()
    assert f"hostfwd=tcp:127.0.0.1:{vm['ssh_port']}-:22" in vf and "restrict=on" in vf

    # testinfra over SSH, with the key Vagrant put in place of the insecure one
    _, host = _host(vm)
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
    # the box's 4 GiB image became the profile's 20 GiB disk: the node role grew the root
    # partition and its ext4 filesystem to fill it (growpart + resize2fs)
    assert first["Grow the root partition to the end of the disk"] == ("ok", True)
    root_gib = int(host.check_output("df --output=size -B1G / | tail -n 1").strip())
    assert root_gib >= 18, root_gib

    # resumable and converged: `kflab up --only node` again keeps the VM (same boot)
    # and the role reports nothing changed, in the output and in the event log
    again = run_kflab("up", "-p", str(vm["prof"]), "--only", "node", env=vm["env"],
                      timeout=900)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "Machine already provisioned" in again.stdout or "already running" in \
        again.stdout, again.stdout[-1500:]
    assert re.search(r"done on \S+: ok=\d+ changed=0 failed=0 unreachable=0",
                     again.stdout), again.stdout[-1500:]
    events = (vm["lab"] / "ansible-events.jsonl").read_text().splitlines()
    stats = [e for e in map(json.loads, events) if e.get("event") == "stats"]
    assert _results(vm["lab"])["Write the sysctls"] == ("ok", False)
    assert stats and all(s["changed"] == 0 and s["ok"] > 0
                         for s in stats[-1]["hosts"].values()), stats
    assert host.file("/proc/sys/kernel/random/boot_id").content_string == boot_id

    st = run_kflab("status", "--json", env=vm["env"], timeout=120)
    report = json.loads(st.stdout)
    assert report["vm"] == "running" and report["ready"] is False  # no k3s yet
    print(f"\nkflab up (TCG, VM + node role): {vm['t_up']:.0f}s")


@pytest.fixture
def reverse_tunnel(vm: dict, tmp_path: Path) -> Iterator[tuple[object, int]]:
    """A loopback artifact server on this host, reachable in the VM at the same
    127.0.0.1:PORT through `ssh -R` (bound to the VM's loopback only)."""
    if vm["up"].returncode != 0:
        pytest.skip("the VM did not come up (see the node role test)")
    key, host = _host(vm)
    with serve(tmp_path / "www") as srv:
        srv.put("kflab-tunnel-check", "ok\n")
        log = open(tmp_path / "ssh-tunnel.log", "wb")  # noqa: SIM115 - closed below
        tunnel = popen(["ssh", "-N", "-i", key, "-p", str(vm["ssh_port"]),
                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=15",
                        "-R", f"127.0.0.1:{srv.port}:127.0.0.1:{srv.port}",
                        "vagrant@127.0.0.1"], stdout=log)
        try:
            deadline = time.monotonic() + 120
            while host.run(f"curl -sf http://127.0.0.1:{srv.port}/kflab-tunnel-check").rc:
                assert tunnel.poll() is None, (tmp_path / "ssh-tunnel.log").read_text()
                assert time.monotonic() < deadline, "the reverse tunnel did not come up"
                time.sleep(2)
            yield srv, host
        finally:
            kill_group(tunnel.pid)
            tunnel.wait()
            log.close()


def test_up_reaches_the_k3s_download_with_the_real_pins(vm: dict, reverse_tunnel,
                                                        tmp_path: Path) -> None:
    srv, host = reverse_tunnel
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    amd64 = versions["artifacts"]["k3s"]["arch"]["amd64"]
    assert versions["artifacts"]["k3s"]["version"] == K3S_VERSION
    standin = k3s_standin()
    srv.put(f"{K3S_RELEASE}/{amd64['file']}", standin)
    # The stand-in checksum file lists the REAL pinned value, as the real release's does.
    srv.put(f"{K3S_RELEASE}/sha256sum-amd64.txt", sums({amd64["file"]: amd64["sha256"]}))
    env = {**vm["env"], "KFLAB_GITHUB_URL": srv.url}

    t0 = time.monotonic()
    real = run_kflab("up", "-p", str(vm["prof"]), "--only", "k3s", env=env, timeout=900)
    t_real = time.monotonic() - t0
    out = real.stdout + real.stderr
    assert real.returncode == 2, out[-3000:]
    # the k3s role's download step runs the shared artifact role's tasks
    assert "task 'artifact : Fetch and verify the sha256: k3s' failed" in real.stderr, \
        out[-3000:]
    assert f"did not match {amd64['sha256']}; it was {sha256(standin)}" in real.stderr
    results = _results(vm["lab"])
    assert results["Cross-check the pinned sha256 with the release's own: k3s"] == \
        ("ok", False)
    assert results["Fetch and verify the sha256: k3s"][0] == "failed"
    # the VM itself fetched both, through the tunnel, from the loopback server
    assert srv.fetched(f"/{K3S_VERSION}/sha256sum-amd64.txt") >= 1
    assert srv.fetched(f"/{K3S_VERSION}/{amd64['file']}") >= 1
    assert not host.file("/usr/local/bin/k3s").exists
    assert "Traceback" not in out

    # The same role with a stand-in's sha256 pinned (everything else real): it installs the
    # file, checks its version, links the commands, starts the service and hands the
    # kubeconfig over. The stand-in (tests/fixtures/standin-k3s/k3s) is no Kubernetes: it
    # writes a kubeconfig, tells systemd it is ready and answers `k3s kubectl` with 0.
    standin = (REPO / "tests" / "fixtures" / "standin-k3s" / "k3s").read_bytes()
    srv.put(f"{K3S_RELEASE}/{amd64['file']}", standin)
    amd64["sha256"] = sha256(standin)
    vfile = tmp_path / "versions.yaml"
    vfile.write_text(yaml.safe_dump(versions))
    srv.put(f"{K3S_RELEASE}/sha256sum-amd64.txt", sums({amd64["file"]: sha256(standin)}))
    t0 = time.monotonic()
    pinned = run_kflab("up", "-p", str(vm["prof"]), "--only", "k3s",
                       env={**env, "KFLAB_VERSIONS_FILE": str(vfile)}, timeout=900)
    t_pinned = time.monotonic() - t0
    out = pinned.stdout + pinned.stderr
    assert pinned.returncode == 0, out[-3000:]
    results = _results(vm["lab"])
    for task in ("Cross-check the pinned sha256 with the release's own: k3s",
                 "Fetch and verify the sha256: k3s", "Check that k3s names the pinned version",
                 "Start k3s", "Wait for the node to be Ready"):
        assert results[task][0] == "ok", (task, results.get(task))
    binary = host.file("/usr/local/bin/k3s")
    assert binary.sha256sum == sha256(standin) and binary.mode == 0o755
    assert host.run("/usr/local/bin/k3s --version").stdout.startswith(
        f"k3s version {K3S_VERSION} ")
    assert host.file("/usr/local/bin/kubectl").linked_to == "/usr/local/bin/k3s"
    handed = vm["lab"] / "kubeconfig"
    assert handed.exists() and handed.stat().st_mode & 0o777 == 0o600, sorted(
        p.name for p in vm["lab"].iterdir())
    assert "client-key-data" not in out
    host.run("systemctl stop k3s")
    print(f"\nkflab up --only k3s (TCG): real pins {t_real:.0f}s, stand-in pin {t_pinned:.0f}s")


def _standin_bundle(dest: Path, vfile: Path) -> dict[str, bytes]:
    """An offline bundle of stand-ins (layout and bundle.json as `kflab bundle create` writes
    them; bundle create itself needs GitHub and a registry, which test_bundle.py stands in
    for): the stand-in k3s, a stand-in airgap archive, one image archive and the release
    checksum file listing both; `vfile` pins them (everything else is versions.yaml's)."""
    versions = yaml.safe_load((REPO / "manifests" / "versions.yaml").read_text())
    blobs = {"k3s": (REPO / "tests" / "fixtures" / "standin-k3s" / "k3s").read_bytes(),
             "k3s-airgap-images-amd64.tar.zst": b"stand-in airgap images (never imported)\n",
             "images/standin-image.tar": b"stand-in OCI archive\n",
             # a git source: the kubeflow role (not run here) checks its commit and tree
             versions["artifacts"]["kubeflow-manifests"]["file"]: b"stand-in archive\n"}
    for name in ("k3s", "k3s-airgap-images"):  # release files: pinned by sha256
        pin = versions["artifacts"][name]["arch"]["amd64"]
        pin["sha256"] = sha256(blobs[pin["file"]])
    vfile.write_text(yaml.safe_dump(versions))
    blobs["sha256sum-amd64.txt"] = sums({n: sha256(blobs[n]) for n in
                                         ("k3s", "k3s-airgap-images-amd64.tar.zst")})
    for rel, data in blobs.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    image = blobs["images/standin-image.tar"]
    (dest / "bundle.json").write_text(json.dumps({
        "kind": "kflab-bundle", "format": 1, "arch": "amd64",
        "files": {rel: sha256(data) for rel, data in blobs.items()},
        "images": {"127.0.0.1:5000/standin:1": {"file": "images/standin-image.tar",
                                                "digest": "sha256:" + sha256(image)}}}))
    return blobs


@pytest.mark.skipif(os.environ.get("KFLAB_TEST_BOX") != "1",
                    reason="builds a box and boots a second TCG VM (about 18 min on 2 busy "
                           "cores): KFLAB_TEST_BOX=1 runs it; left out of CI's time budget")
def test_box_built_from_the_lab_boots_with_nothing_downloaded(vm: dict, tmp_path: Path) -> None:
    """`kflab box build --lab` on the module's VM (converged from a bundle, cleaned, zeroed,
    packaged), then ONE second VM from that box with `kflab up` (lab.yaml vagrant: box:
    metadata.json): the only extra boot of this module (its cost is printed).
    "Ready" here means the node and k3s roles converged with the pinned k3s binary already in
    place (no fetch task ran) and the stand-in k3s started: the stand-in cannot run a cluster,
    nor could k3s under TCG. REAL: box build's provisioning, cleaning and packaging, Vagrant's
    box add (checksum) and boot, the roles. STAND-IN: the bundle's k3s and archives (pinned
    through KFLAB_VERSIONS_FILE); KFLAB_GITHUB_URL points at a closed loopback port, and the
    VM has no network anyway (restrict=on)."""
    if vm["up"].returncode != 0:
        pytest.skip("the VM did not come up (see the node role test)")
    _, host = _host(vm)
    first_id = host.file("/etc/machine-id").content_string.strip()
    first_key = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[1]
    bundle, vfile = tmp_path / "bundle", tmp_path / "versions.yaml"
    blobs = _standin_bundle(bundle, vfile)
    env = {**vm["env"], "KFLAB_VERSIONS_FILE": str(vfile),
           "KFLAB_GITHUB_URL": f"http://127.0.0.1:{free_port()}"}
    out = tmp_path / "handout"
    t0 = time.monotonic()
    built = run_kflab("box", "build", "--bundle", str(bundle), "--lab", vm["name"], "-o",
                      str(out), "--version", "1.0.0", env=env, timeout=1800)
    t_build = time.monotonic() - t0
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    results = _results(vm["lab"])
    # from the bundle, offline (or kept: the k3s test above may have put the same bytes there)
    assert results["Check that k3s names the pinned version"][0] == "ok"
    assert results["Fetch and verify the sha256: k3s-airgap-images-amd64.tar.zst"][0] == "ok"
    assert "sources for the kubeflow role in /var/lib/kflab/downloads" in built.stdout
    assert results["Start k3s"][0] == "skipped"
    assert "trimmed" in built.stdout, built.stdout[-2000:]  # discard=unmap reached qcow2
    meta = json.loads((out / "metadata.json").read_text())
    prov = meta["versions"][0]["providers"][0]
    boxfile = out / prov["url"]
    assert meta["versions"][0]["version"] == "1.0.0" and prov["name"] == "libvirt"
    assert prov["checksum_type"] == "sha256" and prov["checksum"] == sha256(
        boxfile.read_bytes())
    assert meta["name"] == f"kflab-box/{prov['checksum'][:16]}"
    import tarfile

    with tarfile.open(boxfile) as tar:
        assert tar.getnames() == ["metadata.json", "box.img"]
        inner = json.load(tar.extractfile("metadata.json"))  # type: ignore[arg-type]
    assert inner == {"provider": "libvirt", "format": "qcow2", "virtual_size": 20}
    st = json.loads(run_kflab("status", "--json", env=vm["env"], timeout=120).stdout)
    assert st["vm"] == "stopped"  # packaged powered off

    name2, ssh2 = f"{vm['name']}-b", free_port()
    prof2 = tmp_path / "lab.yaml"
    prof2.write_text(vm["prof"].read_text().replace(f"name: {vm['name']}", f"name: {name2}")
                     .replace(f"ssh_port: {vm['ssh_port']}", f"ssh_port: {ssh2}")
                     .replace("api_port:", f"api_port: {free_port()}\n# was:")
                     + "  box: handout/metadata.json\n")
    env2 = {**env, "KFLAB_STATE": str(tmp_path / "state2")}
    lab2 = tmp_path / "state2" / "labs" / name2
    try:
        t0 = time.monotonic()
        up2 = run_kflab("up", "-p", str(prof2), "--only", "node,k3s", env=env2, timeout=1800)
        t_box = time.monotonic() - t0
        out2 = up2.stdout + up2.stderr
        assert up2.returncode == 0, out2[-3000:]
        assert f"vagrant box add {meta['name']} 1.0.0" in up2.stdout, up2.stdout[-2000:]
        res2 = _results(lab2)
        assert res2["Keep the file in place: it is the pinned one (k3s)"] == ("ok", False)
        for task in ("Fetch the release's checksum file: sha256sum-amd64.txt",
                     "Fetch and verify the sha256: k3s"):
            assert res2.get(task, ("skipped",))[0] == "skipped", (task, res2.get(task))
        for task in ("Check that k3s names the pinned version", "Start k3s",
                     "Wait for the node to be Ready"):
            assert res2[task][0] == "ok", (task, res2.get(task))
        inv = (lab2 / "inventory.ini").read_text()
        import testinfra

        host2 = testinfra.get_host(
            f"ssh://vagrant@127.0.0.1:{ssh2}", sudo=True,
            ssh_identity_file=inv.split("ansible_ssh_private_key_file=")[1].split()[0],
            ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
        assert host2.file("/usr/local/bin/k3s").sha256sum == sha256(blobs["k3s"])
        images = "/var/lib/rancher/k3s/agent/images"
        assert host2.file(f"{images}/k3s-airgap-images-amd64.tar.zst").sha256sum == \
            sha256(blobs["k3s-airgap-images-amd64.tar.zst"])
        assert host2.file(f"{images}/standin-image.tar").exists
        manifests = yaml.safe_load(vfile.read_text())[
            "artifacts"]["kubeflow-manifests"]["file"]
        assert host2.file(f"/var/lib/kflab/downloads/{manifests}").sha256sum == \
            sha256(blobs[manifests])
        # this VM's own identity, not the baked one's
        assert host2.file("/etc/machine-id").content_string.strip() not in ("", first_id)
        key2 = host2.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[1]
        assert key2 != first_key
        print(f"\nTCG: fresh kflab up --only node {vm['t_up']:.0f}s; box build (converge from "
              f"the bundle + package) {t_build:.0f}s, box {boxfile.stat().st_size / 2**30:.2f}"
              f" GiB; kflab up --box --only node,k3s (box add + boot + roles) {t_box:.0f}s")
    finally:
        if (lab2 / "lab.json").exists():
            run_kflab("down", "--destroy", env=env2, timeout=300)
        subprocess.run(["vagrant", "box", "remove", "--force", "--all", meta["name"]],
                       capture_output=True, check=False)
        vols = subprocess.run(["virsh", "-c", "qemu:///system", "vol-list", "--pool",
                               "default"], capture_output=True, text=True, check=False).stdout
        tag = meta["name"].replace("/", "-VAGRANTSLASH-")
        for line in vols.splitlines()[2:]:
            if line.split() and line.split()[0].startswith(tag):
                subprocess.run(["virsh", "-c", "qemu:///system", "vol-delete", "--pool",
                                "default", line.split()[0]], capture_output=True, check=False)


def test_down_destroy_removes_the_vm_and_the_record(vm: dict) -> None:
    down = run_kflab("down", "--destroy", env=vm["env"], timeout=300)
    domains = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                             capture_output=True, text=True, check=False).stdout
    assert down.returncode == 0, down.stdout + down.stderr
    assert "lab destroyed" in down.stdout
    assert vm["name"] not in domains
    assert not (vm["lab"] / "vagrant" / "Vagrantfile").exists()
