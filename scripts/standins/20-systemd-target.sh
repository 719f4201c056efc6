#!/usr/bin/env bash
# Stand-in: a real systemd "node" (podman + runc) that the Ansible roles run against in
# tests/integration. Idempotent and cached: the debootstrap rootfs and both images are reused
# until the Containerfile changes. Needs root (apt, debootstrap, rootful podman).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/integration/systemd_target
export CONTAINERS_CONF="$PWD/$here/containers.conf"
base=localhost/kflab-debootstrap:bookworm
image=localhost/kflab-systemd-target:bookworm
want=$(sha256sum "$here/Containerfile" | cut -c1-16)

need=()
for tool in podman buildah runc debootstrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
command -v newuidmap >/dev/null || need+=(uidmap)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "${need[@]}" >/dev/null \
    || { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
         DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "${need[@]}" >/dev/null; }
fi

have=$(podman image inspect --format '{{ index .Labels "kflab.containerfile" }}' "$image" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "systemd target image cached: $image ($want)"
  exit 0
fi

if ! podman image exists "$base"; then
  # The mirror apt already uses on this machine (CI machines reach only Debian's mirror).
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
           | awk '/^URIs:/ {print $2} /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^http/) {print $i; break}}' \
           | grep -E '/debian/?$' | head -n1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  rootfs=$(mktemp -d /var/tmp/kflab-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  tar -C "$rootfs" -c . | podman import -q - "$base" >/dev/null
fi
echo "building $image"
podman build -q --label "kflab.containerfile=$want" -t "$image" -f "$here/Containerfile" "$here" >/dev/null
echo "systemd target image built: $image ($want)"
