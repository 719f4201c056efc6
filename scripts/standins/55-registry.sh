#!/usr/bin/env bash
# An image registry on loopback for tests/integration/test_bundle.py: Debian's docker-registry
# (started by the test itself on 127.0.0.1, never as a service) and skopeo, which the offline
# bundle uses to copy images. Idempotent: nothing happens when both are on PATH.
set -euo pipefail
if command -v skopeo >/dev/null && command -v docker-registry >/dev/null; then
  echo "registry tools present: $(skopeo --version)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "skopeo/docker-registry missing and not root: the bundle tests will skip" >&2
  exit 0
fi
echo "installing skopeo and docker-registry (Debian packages; the registry service is not started)"
# The package's service would listen on every interface: a policy-rc.d keeps it from starting.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 0755 "$policy" && made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
install() {
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
    --no-install-recommends skopeo docker-registry >/dev/null
}
install || { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null && install; }
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
echo "registry tools installed: $(skopeo --version)"
