#!/usr/bin/env bash
# Stand-in: a real kube-apiserver v1.20 (core objects, RBAC) + etcd 3.4 for
# tests/integration/apiservers.py, built from Debian bookworm's own kubernetes source package
# (recipe: ../shared/recipes/envtest.md). Only the source tarball is fetched, pinned by sha256.
# Cached under $KFLAB_STANDIN_CACHE/kube-apiserver/<key>/bin, keyed by the source's sha256 and
# the build steps below (the body of build(), comments excluded): about 8 min cold on 2 cores,
# nothing (no network, no apt) when cached. Go and reflect2 come from apt (installed when
# missing); etcd is unpacked from its .deb, never installed (installing would start a service).
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=1.20.2
ORIG=kubernetes_1.20.5+really1.20.2.orig.tar.gz
ORIG_SHA256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
MIRROR="${KFLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${KFLAB_STANDIN_CACHE:-/var/cache/kflab-standins}/kube-apiserver"

build() {  # build OUT_DIR WORK_DIR: OUT_DIR/kube-apiserver and OUT_DIR/etcd
  local out=$1 work=$2 src
  curl -fsSL --retry 3 -o "$work/$ORIG" "$MIRROR/pool/main/k/kubernetes/$ORIG"
  echo "$ORIG_SHA256  $work/$ORIG" | sha256sum -c --quiet -
  tar -C "$work" -xzf "$work/$ORIG"
  src="$work/kubernetes-$VERSION"
  # The vendored reflect2 v1.0.1 crashes under Go 1.19 (SIGSEGV on the first write): use Debian's.
  rm -rf "$src/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$src/vendor/github.com/modern-go/"
  rm -f "$src/vendor/github.com/modern-go/reflect2/go.mod"
  mkdir -p "$src/.go/src/k8s.io" "$work/home"
  ln -sfn ../../.. "$src/.go/src/k8s.io/kubernetes"
  # No git tree: give the build its version, so /version says v1.20.2.
  printf "KUBE_GIT_VERSION='v%s'\nKUBE_GIT_MAJOR='1'\nKUBE_GIT_MINOR='20'\nKUBE_GIT_TREE_STATE='archive'\n" \
    "$VERSION" > "$work/version.env"
  (cd "$src" && env GOPATH="$src/.go" CGO_ENABLED=0 GOPROXY=off GOFLAGS= GOTOOLCHAIN=local \
     GOCACHE="$work/gocache" HOME="$work/home" KUBE_GIT_VERSION_FILE="$work/version.env" \
     nice -n 10 make WHAT=cmd/kube-apiserver)
  cp "$src/_output/bin/kube-apiserver" "$out/kube-apiserver"
  (cd "$work" && apt-get download -q etcd-server >/dev/null 2>&1 ||
     { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null && apt-get download -q etcd-server; })
  dpkg -x "$work"/etcd-server_*.deb "$work/etcd"
  cp "$work/etcd/usr/bin/etcd" "$out/etcd"
}

key=$( { echo "$ORIG_SHA256"; declare -f build; } | sha256sum | cut -c1-16)
dir="$cache/$key"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # two runs on one machine build once

if [ ! -f "$dir/.kflab-ok" ]; then
  # openssl: the test fixture makes the service-account key pair with it.
  need=()
  for p in golang-go golang-github-modern-go-reflect2-dev make rsync curl openssl; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then echo "41-kube-apiserver: need root to install ${need[*]}; skipping"; exit 0; fi
    echo "41-kube-apiserver: installing ${need[*]} (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${need[@]}" >/dev/null \
      || { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
           apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
  fi
  start=$SECONDS
  work="$cache/build-$key"
  rm -rf "$work" "$dir"
  mkdir -p "$work" "$dir/bin"
  echo "41-kube-apiserver: building v$VERSION (key $key; about 8 min cold on 2 cores)"
  build "$dir/bin" "$work" >"$cache/build-$key.log" 2>&1 || { tail -30 "$cache/build-$key.log"; exit 1; }
  "$dir/bin/kube-apiserver" --version
  "$dir/bin/etcd" --version >/dev/null
  rm -rf "$work"
  echo "$key" > "$dir/.kflab-ok"
  echo "41-kube-apiserver: built in $((SECONDS - start)) s"
fi
ln -sfn "$key" "$cache/current"
# Builds of older keys go.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
echo "41-kube-apiserver: $dir/bin ($("$dir/bin/kube-apiserver" --version), $("$dir/bin/etcd" --version | head -n1))"
