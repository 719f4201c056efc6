"""A baked Vagrant box for a class: one VM per student, started with nothing downloaded.

`build` provisions a VM from a verified offline bundle: the node role, then the k3s role
with k3s_start false (the pinned binary, its config and unit, the airgap images and the
bundle's OCI image archives in /var/lib/rancher/k3s/agent/images/, which k3s imports when it
first starts), and the git archives where the kubeflow role looks before fetching. Then
`package` cleans it (apt caches and lists, logs, k3s state, machine-id, SSH host keys,
regenerated on first boot; Vagrant's insecure key back in place, as every base box has it),
frees the unused blocks (fstrim through the disk's discard=unmap, else zeros), powers it off
and writes:

    kflab-box-<sha256[:16]>.box   the libvirt box (metadata.json + box.img, qcow2)
    metadata.json                 Vagrant's box metadata: name (content-addressed), version,
                                  provider, url (the .box, relative), checksum_type sha256

A student then runs `kflab up --box metadata.json` (or `vagrant box add metadata.json`).
"""

from __future__ import annotations

import glob
import json
import math
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.config import Profile
from lab.errors import LabError
from lab.providers.base import Say
from lab.providers.vagrant_box import content_name, metadata_doc, sha256_file

# Where Vagrant keeps its insecure public key (Debian package, HashiCorp's packages).
_INSECURE_KEYS = ("/usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub",
                  "/opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub",
                  "/opt/vagrant/embedded/gems/*/gems/vagrant-*/keys/vagrant.pub")
DONE = "kflab-box-clean-done"
# Where the kubeflow role looks for the git sources before fetching them (kflab_state_dir of
# a VM, playbooks/group_vars/all/kflab.yml; get_url fetches only when the file is absent, and
# the role checks the commit and tree of what it finds either way).
DOWNLOADS = "/var/lib/kflab/downloads"
HOSTKEYS_UNIT = """[Unit]
Description=Make this VM's own SSH host keys (removed when its kflab box was built)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
"""


def insecure_key() -> str:
    """Vagrant's public insecure key, which Vagrant swaps for a new key on first boot."""
    for pattern in _INSECURE_KEYS:
        for path in sorted(glob.glob(pattern), reverse=True):
            return Path(path).read_text().strip()
    raise LabError("Vagrant's insecure public key (keys/vagrant.pub) was not found",
                   hint="install Vagrant from its Debian or official package")


def clean_script(key: str) -> str:
    """Run as root in the VM: leaves what a box needs, nothing of this VM's identity."""
    return f"""set -eu
if [ -f /etc/systemd/system/k3s.service ]; then systemctl disable --now k3s || true; fi
# no cluster state: k3s makes its own in each VM; the images it imports at start stay
if [ -d /var/lib/rancher/k3s ]; then
  find /var/lib/rancher/k3s -mindepth 1 -maxdepth 1 ! -name agent -exec rm -rf {{}} +
fi
if [ -d /var/lib/rancher/k3s/agent ]; then
  find /var/lib/rancher/k3s/agent -mindepth 1 -maxdepth 1 ! -name images -exec rm -rf {{}} +
fi
rm -rf /etc/rancher/k3s/k3s.yaml /etc/rancher/node /var/lib/kflab/offline
apt-get clean
rm -rf /var/lib/apt/lists/*
journalctl --rotate >/dev/null 2>&1 || true
journalctl --vacuum-time=1s >/dev/null 2>&1 || true
find /var/log -type f \\( -name '*.gz' -o -name '*.[0-9]' -o -name '*.old' \\) -delete
find /var/log -type f -exec truncate -s 0 {{}} +
rm -rf /tmp/* /var/tmp/* /root/.bash_history /home/vagrant/.bash_history
truncate -s 0 /etc/machine-id
rm -f /var/lib/dbus/machine-id
install -d -m 0700 -o vagrant -g vagrant /home/vagrant/.ssh
printf '%s\\n' {shlex.quote(key)} > /home/vagrant/.ssh/authorized_keys
chown vagrant:vagrant /home/vagrant/.ssh/authorized_keys
chmod 0600 /home/vagrant/.ssh/authorized_keys
cat > /etc/systemd/system/kflab-ssh-host-keys.service <<'UNIT'
{HOSTKEYS_UNIT}UNIT
systemctl enable kflab-ssh-host-keys.service >/dev/null 2>&1
rm -f /etc/ssh/ssh_host_*
if ! fstrim -v /; then
  dd if=/dev/zero of=/kflab-zero bs=1M status=none || true
  rm -f /kflab-zero
fi
sync
echo {DONE}
systemctl --no-block poweroff
"""


def _run(argv: list[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise LabError(f"{what} failed ({proc.returncode}): {' / '.join(tail)}",
                       hint=f"the command was: {shlex.join(argv)}")
    return proc


def _disk(provider: Any) -> Path:
    """The libvirt domain's root disk image (the domain id Vagrant recorded)."""
    ids = list((provider.root / ".vagrant" / "machines").glob("*/libvirt/id"))
    if not ids:
        raise LabError(f"no libvirt domain id under {provider.root / '.vagrant'}",
                       hint="is this lab's VM created? `kflab status`")
    uuid = ids[0].read_text().strip()
    out = _run(["virsh", "-c", "qemu:///system", "domblklist", uuid, "--details"],
               "virsh domblklist").stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["file", "disk"]:
            return Path(parts[3])
    raise LabError(f"domain {uuid} has no disk image", hint="see `virsh domblklist`")


def place_sources(provider: Any, bundle: Path, say: Say) -> list[str]:
    """Copy the bundle's git archives (kubeflow/manifests, argo-workflows, ...) to where the
    kubeflow role finds them in the VM, so that it fetches nothing in class."""
    from lab.components import catalog

    placed = []
    for art in catalog.load().artifacts.values():
        if art.kind != "git" or not (bundle / art.file).is_file():
            continue
        dest = f"{DOWNLOADS}/{art.file}"
        with open(bundle / art.file, "rb") as fh:
            proc = subprocess.run(
                [*provider.ssh_argv(), "sudo", "sh", "-c", shlex.quote(
                    f"install -d -m 0755 {DOWNLOADS} && cat > {dest}.part && "
                    f"chmod 0644 {dest}.part && mv {dest}.part {dest}")],
                stdin=fh, capture_output=True, text=False, check=False, timeout=1800)
        if proc.returncode != 0:
            raise LabError(f"copying {art.file} into the VM failed: "
                           f"{proc.stderr.decode(errors='replace').strip()[-300:]}",
                           hint="check the VM's free disk space; re-run")
        placed.append(art.file)
    if placed:
        say(f"sources for the kubeflow role in {DOWNLOADS}: {', '.join(placed)}")
    return placed


def _clean_and_power_off(provider: Any, say: Say, timeout: float = 600) -> None:
    argv = [*provider.ssh_argv(), "sudo", "sh", "-s"]
    say("clean: apt caches, logs, k3s state, machine-id, SSH host keys; free the unused "
        "blocks; power off")
    proc = subprocess.run(argv, input=clean_script(insecure_key()), capture_output=True,
                          text=True, check=False, timeout=timeout)
    if DONE not in proc.stdout:  # the connection may drop as the VM powers off: judge by it
        raise LabError(f"cleaning the VM failed ({proc.returncode}): "
                       + " / ".join(proc.stderr.strip().splitlines()[-3:]),
                       hint="the VM is unchanged past the failing step; fix and re-run")
    trimmed = [ln for ln in proc.stdout.splitlines() if "trimmed" in ln]
    say("  " + (trimmed[0] if trimmed else "free space zeroed (no discard)"))
    deadline = time.monotonic() + timeout
    while provider.status().state != "stopped":
        if time.monotonic() > deadline:
            raise LabError("the VM did not power off", hint="`kflab down` stops it")
        time.sleep(3)


def package(provider: Any, out: Path, version: str, say: Say) -> dict[str, Any]:
    """Clean the running lab VM, power it off and write the box and its metadata to `out`."""
    if provider.status().state != "running":
        raise LabError(f"the VM of lab {provider.profile.name} is not running",
                       hint="`kflab up` it first")
    kind = provider.vagrant_provider
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    _clean_and_power_off(provider, say)
    with tempfile.TemporaryDirectory(dir=out, prefix=".box-") as tmp:
        work, box = Path(tmp), Path(tmp) / "out.box"
        if kind == "libvirt":
            disk = _disk(provider)
            say(f"qemu-img convert {disk} (its backing image flattened, free blocks left out)")
            _run(["qemu-img", "convert", "-O", "qcow2", str(disk), str(work / "box.img")],
                 "qemu-img convert")
            info = json.loads(_run(["qemu-img", "info", "--output=json",
                                    str(work / "box.img")], "qemu-img info").stdout)
            (work / "metadata.json").write_text(json.dumps(
                {"provider": "libvirt", "format": "qcow2",
                 "virtual_size": math.ceil(info["virtual-size"] / 2**30)}) + "\n")
            with tarfile.open(box, "w") as tar:
                for name in ("metadata.json", "box.img"):
                    tar.add(work / name, arcname=name)
        else:  # VirtualBox: Vagrant's own packaging (not run in kflab's tests: no VirtualBox)
            _run(["vagrant", "package", "--output", str(box)], "vagrant package",
                 cwd=provider.root, env=provider._env())
        say("sha256 of the box")
        sha = sha256_file(box)
        name = f"{content_name(sha).replace('/', '-')}.box"
        final = out / name
        shutil.move(box, final)
    meta = metadata_doc(content_name(sha), version, kind, name, sha)
    (out / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return {"box": str(final), "metadata": str(out / "metadata.json"), "name": content_name(sha),
            "version": version, "provider": kind, "sha256": sha,
            "size": final.stat().st_size, "seconds": round(time.monotonic() - t0, 1)}


def build(bundle: Path, profile: Profile | None, state: Path, out: Path, *, version: str, say: Say,
          lab: str | None = None, keep: bool = False) -> dict[str, Any]:
    """Provision a VM from the bundle (or converge the named lab's VM from it), then package
    it. A VM made here is destroyed afterwards unless `keep`."""
    from lab import lifecycle
    from lab.providers import get_provider
    from lab.teaching.bundle import verify

    files = verify(bundle)["files"]
    say(f"bundle {bundle}: {len(files)} files verified")
    if lab:
        profile = lifecycle.current(state, lab)[0]
    if profile is None:
        raise LabError("no lab profile for the build VM", hint="pass -p lab.yaml or --lab NAME")
    if not profile.is_vagrant:
        raise LabError(f"a box needs a Vagrant provider (lab {profile.name} is "
                       f"{profile.provider})", hint="use provider: vagrant-libvirt")
    if profile.gpu_wanted:
        profile = profile.with_overrides(gpu="off")  # a box is for any student's machine
    profile = profile.with_overrides(offline=str(bundle.resolve()))
    t0 = time.monotonic()
    lifecycle.up(profile, state, say, only=["node", "k3s"], role_vars={"k3s_start": False})
    made = get_provider(profile, state)
    try:
        place_sources(made, bundle, say)
        provisioned = time.monotonic() - t0
        res = package(made, out, version, say)
    finally:
        if not lab and not keep:
            lifecycle.down(state, say, destroy=True, name=profile.name)
    return {**res, "provision_seconds": round(provisioned, 1)}
