#!/usr/bin/env bash
# Stand-in for a Vagrant lab host: Debian's vagrant 2.3.4 + vagrant-libvirt + libvirt/qemu,
# and a small locally built libvirt box (no Vagrant Cloud here). Idempotent and cached:
# the box is built once into $KFLAB_STANDIN_CACHE and added to vagrant as local/kflab-deb12.
# The box already holds the node role's packages (and python3-apt for Ansible's apt module):
# the test VM has no network, so the real node role must converge without a mirror.
# Cache key = this script + node_packages: a change to either builds a new box, added under a
# new box version, so vagrant-libvirt uploads a new base volume instead of reusing the old one.
# Recipe: ../shared/recipes/vagrant-libvirt-tcg.md (debootstrap replaces the podman image chain).
set -euo pipefail
CACHE="${KFLAB_STANDIN_CACHE:-/var/cache/kflab-standins}/vagrant"
BOX_NAME="local/kflab-deb12"
MIRROR="${KFLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

need_pkgs=(vagrant vagrant-libvirt libvirt-daemon-system qemu-system-x86 qemu-utils debootstrap fdisk)
missing=()
for p in "${need_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "30-vagrant: need root to install ${missing[*]}; skipping"; exit 0; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -o DPkg::Lock::Timeout=600 -qq
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_defaults="$here/../../playbooks/roles/node/defaults/main.yml"
node_pkgs="$(sed -n 's/^node_packages: *\[\(.*\)\].*/\1/p' "$node_defaults" | tr -d ' ')"
[ -n "$node_pkgs" ] || { echo "30-vagrant: no 'node_packages: [...]' line in $node_defaults"; exit 1; }
# ... and the VM-only ones (growpart), so the role converges offline in a VM too
vm_pkgs="$(sed -n 's/^node_vm_packages: *\[\(.*\)\].*/\1/p' "$node_defaults" | tr -d ' ')"
node_pkgs="$node_pkgs${vm_pkgs:+,$vm_pkgs}"
KEY="$( { cat "${BASH_SOURCE[0]}"; echo "$node_pkgs"; } | sha256sum | cut -c1-12)"
BOX="$CACHE/kflab-deb12-$KEY.box"
VERSION_FILE="$CACHE/kflab-deb12-$KEY.version"   # the box version this build was added as

box_versions() {  # the installed versions of $BOX_NAME, one a line
  vagrant box list 2>/dev/null | sed -n "s|^${BOX_NAME} *(libvirt, \(.*\))\$|\1|p"
}
drop_other_versions() {  # older builds: their box files go (their libvirt volumes stay in use)
  # Not `vagrant box remove`: vagrant-libvirt's remove hook connects to libvirtd, which need
  # not run here (no systemd; the VM tests start it by hand), and a key change would fail.
  local v boxes="${VAGRANT_HOME:-$HOME/.vagrant.d}/boxes/${BOX_NAME//\//-VAGRANTSLASH-}"
  for v in $(box_versions); do
    [ "$v" = "$1" ] || rm -rf "${boxes:?}/$v"
  done
  find "$CACHE" -maxdepth 1 \( -name 'kflab-deb12*.box' -o -name 'kflab-deb12-*.version' \) \
    ! -name "kflab-deb12-$KEY.*" -delete
  find "$CACHE" -maxdepth 1 -name 'rootfs*' ! -name "rootfs-$KEY" -exec rm -rf {} +
}

if [ -s "$VERSION_FILE" ] && box_versions | grep -qxF "$(cat "$VERSION_FILE")"; then
  drop_other_versions "$(cat "$VERSION_FILE")"
  echo "30-vagrant: box ${BOX_NAME} $(cat "$VERSION_FILE") present (key $KEY)"; exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "30-vagrant: need root to build the box; skipping"; exit 0; fi
mkdir -p "$CACHE"
if [ ! -s "$BOX" ]; then
  work="$(mktemp -d "$CACHE/build.XXXX")"
  mnt="$work/mnt"; loop=""
  cleanup() {
    set +e
    for d in dev/pts dev proc sys; do mountpoint -q "$mnt/$d" && umount "$mnt/$d"; done
    mountpoint -q "$mnt" && umount "$mnt"
    [ -n "$loop" ] && { partx -d "$loop" 2>/dev/null; losetup -d "$loop"; }
    rm -rf "$work"
  }
  trap cleanup EXIT
  rootfs="$CACHE/rootfs-$KEY"   # kept: a failed later step does not repeat the download
  if [ ! -f "$rootfs/.kflab-debootstrap-ok" ]; then
  rm -rf "$rootfs"
  # The package set of ../shared/recipes/Containerfile.{systemd-target,vm-kernel,vagrant-box}.
  debootstrap --variant=minbase \
    --include=python3,python3-apt,systemd,systemd-sysv,dbus,openssh-server,sudo,iproute2,procps,linux-image-cloud-amd64,initramfs-tools,ifupdown,isc-dhcp-client,e2fsprogs,qemu-guest-agent,grub-pc-bin,grub2-common,rsync,"$node_pkgs" \
    bookworm "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
  touch "$rootfs/.kflab-debootstrap-ok"
  fi
  pub="$(find /usr/share/rubygems-integration /usr/lib/ruby /usr/share/vagrant -name vagrant.pub -path '*keys*' 2>/dev/null | head -1 || true)"
  [ -n "$pub" ] || { echo "30-vagrant: vagrant's insecure public key not found"; exit 1; }
  install -d -m 700 "$rootfs/home/vagrant/.ssh"
  cp "$pub" "$rootfs/home/vagrant/.ssh/authorized_keys"
  chroot "$rootfs" /bin/bash -euc '
    id vagrant >/dev/null 2>&1 || useradd -M -d /home/vagrant -s /bin/bash vagrant
    echo vagrant:vagrant | chpasswd
    chown -R vagrant:vagrant /home/vagrant; chmod 600 /home/vagrant/.ssh/authorized_keys
    echo "vagrant ALL=(ALL) NOPASSWD:ALL" > /etc/sudoers.d/vagrant; chmod 440 /etc/sudoers.d/vagrant
    printf "[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n" > /etc/systemd/network/99-all.network
    printf "auto lo\niface lo inet loopback\n" > /etc/network/interfaces
    systemctl enable systemd-networkd qemu-guest-agent ssh >/dev/null 2>&1
    echo "LABEL=root / ext4 defaults 0 1" > /etc/fstab; echo kflabbox > /etc/hostname
    # a small swap file, on at boot like on a stock install: the node role must turn it off
    dd if=/dev/zero of=/swapfile bs=1M count=64 status=none; chmod 600 /swapfile
    mkswap /swapfile >/dev/null; echo "/swapfile none swap sw 0 0" >> /etc/fstab
    rm -f /etc/ssh/ssh_host_*
    printf "[Unit]\nDescription=regenerate SSH host keys\nBefore=ssh.service\nConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\n[Service]\nType=oneshot\nExecStart=/usr/bin/ssh-keygen -A\n[Install]\nWantedBy=multi-user.target\n" > /etc/systemd/system/ssh-hostkeys.service
    systemctl enable ssh-hostkeys >/dev/null 2>&1
    : > /etc/machine-id
    k=$(ls /boot/vmlinuz-* | sort -V | tail -1); [ -e /vmlinuz ] || ln -s "${k#/}" /vmlinuz
    i=$(ls /boot/initrd.img-* | sort -V | tail -1); [ -e /initrd.img ] || ln -s "${i#/}" /initrd.img
    apt-get clean; rm -rf /var/lib/apt/lists/*'
  raw="$work/disk.raw"
  truncate -s 4G "$raw"
  echo 'start=2048, type=83, bootable' | sfdisk -q "$raw"
  loop="$(losetup -f --show "$raw")"
  partx -a "$loop"   # no udev here: create the partition node by hand
  mkfs.ext4 -q -L root "${loop}p1"
  mkdir -p "$mnt"; mount "${loop}p1" "$mnt"
  cp -a "$rootfs/." "$mnt/"; rm -f "$mnt/.kflab-debootstrap-ok"
  # grub from the image itself (the host needs no grub packages)
  for d in dev proc sys; do mount --bind "/$d" "$mnt/$d"; done
  chroot "$mnt" grub-install --target=i386-pc --modules="part_msdos ext2 search search_label" \
    "$loop" >"$work/grub.log" 2>&1 || { cat "$work/grub.log"; exit 1; }
  for d in sys proc dev; do umount "$mnt/$d"; done
  cat > "$mnt/boot/grub/grub.cfg" <<'CFG'
set timeout=0
menuentry "debian" {
  search --no-floppy --label root --set=root
  linux /vmlinuz root=LABEL=root ro console=ttyS0 net.ifnames=0
  initrd /initrd.img
}
CFG
  umount "$mnt"; partx -d "$loop"; losetup -d "$loop"; loop=""
  qemu-img convert -O qcow2 "$raw" "$work/box.img"
  printf '{"provider":"libvirt","format":"qcow2","virtual_size":4}\n' > "$work/metadata.json"
  printf 'Vagrant.configure("2") do |config|\nend\n' > "$work/Vagrantfile"
  tar -C "$work" -cf "$BOX.tmp" metadata.json Vagrantfile box.img
  mv "$BOX.tmp" "$BOX"
  rm -rf "$rootfs"
fi
# A versioned box (a one-entry catalog): vagrant-libvirt names the base volume after the
# version, so a rebuilt box never meets the volume of an older one in the storage pool.
version="1.0.$(date +%s)"
catalog="$CACHE/kflab-deb12-$KEY.json"
printf '{"name":"%s","versions":[{"version":"%s","providers":[{"name":"libvirt","url":"file://%s","checksum_type":"sha256","checksum":"%s"}]}]}\n' \
  "$BOX_NAME" "$version" "$BOX" "$(sha256sum "$BOX" | cut -d' ' -f1)" > "$catalog"
vagrant box add --force "$catalog" >/dev/null
rm -f "$catalog"
echo "$version" > "$VERSION_FILE"
drop_other_versions "$version"
echo "30-vagrant: box ${BOX_NAME} $version added from $BOX (key $KEY)"
