#!/usr/bin/env bash
# Stand-in: a non-root user with subordinate ids, for the rootless-podman tests of the
# container runner (tests/integration/test_containers_rootless.py): the user `kflab-rootless`
# (no password, no login shell), 65536 subuids and subgids for it (as Debian's useradd gives a
# new user), a venv of Debian's own python3 with kflab's base lock (kflab itself is imported
# from the checkout), and the python test image (25-workload-images.sh) in its own podman
# store. Idempotent and cached: nothing is redone when the user, the venv's lock and the
# image id are current. Needs root (useradd, usermod, runuser).
set -euo pipefail
cd "$(dirname "$0")/../.."
user=kflab-rootless
image=localhost/kflab-python:bookworm
conf="$PWD/tests/integration/systemd_target/containers.conf"
export CONTAINERS_CONF="$conf"
if [ "$(id -u)" != 0 ]; then
  echo "not root: the rootless tests skip" >&2
  exit 0
fi
need=()
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "${need[@]}" >/dev/null
fi
if ! id "$user" >/dev/null 2>&1; then
  useradd --create-home --shell /usr/sbin/nologin "$user"
fi
uid=$(id -u "$user")
home=$(getent passwd "$user" | cut -d: -f6)
if ! grep -q "^$user:" /etc/subuid; then usermod --add-subuids 300000-365535 "$user"; fi
if ! grep -q "^$user:" /etc/subgid; then usermod --add-subgids 300000-365535 "$user"; fi
as_user() { runuser -u "$user" -- env -i HOME="$home" PATH=/usr/bin:/bin \
  XDG_RUNTIME_DIR="/tmp/kflab-rootless-run-$uid" CONTAINERS_CONF="$conf" \
  PIP_FIND_LINKS="${PIP_FIND_LINKS:-}" PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"; }
install -d -o "$user" -m 0700 "/tmp/kflab-rootless-run-$uid"

lock=locks/linux-$(uname -m)/base.txt
want=$(sha256sum "$lock" | cut -c1-16)
if [ "$(cat "$home/venv/.kflab-lock" 2>/dev/null || true)" != "$want" ]; then
  echo "venv for $user: Debian's python3 and $lock"
  rm -rf "$home/venv"
  as_user /usr/bin/python3 -m venv "$home/venv"
  as_user "$home/venv/bin/pip" install -q --no-deps --require-hashes -r "$PWD/$lock"
  echo "$want" | as_user tee "$home/venv/.kflab-lock" >/dev/null
fi

have=$(as_user podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
wantid=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
if [ -z "$wantid" ]; then
  echo "$image is not built (scripts/standins/25-workload-images.sh): the rootless tests skip" >&2
  exit 0
fi
if [ "$have" != "$wantid" ]; then
  echo "loading $image into $user's podman store"
  podman save -q "$image" | as_user podman load -q >/dev/null
fi
echo "rootless podman ready for $user: $(as_user podman info --format '{{.Host.Security.Rootless}} {{.Store.GraphDriverName}}')"
