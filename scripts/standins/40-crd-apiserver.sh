#!/usr/bin/env bash
# Stand-in: Kubernetes' CRD API server (k8s.io/apiextensions-apiserver 0.36, the code
# kube-apiserver runs for CRDs and custom resources) + etcd 3.5 + kubectl 1.36, for
# tests/integration/apiservers.py and tests/standins/cluster.py. Built from
# scripts/standins/crd-apiserver/main.go (this project's) and Debian sid's Go sources, pinned in
# crd-apiserver/debs.lock: apt fetches each package at its pinned version (checked against
# sid's signed index) and the .deb's sha256 must be the lock's. Nothing is installed into the
# system: the .debs are unpacked under the cache, the Go build runs offline (GOPATH mode,
# GOPROXY=off). Cached under $KFLAB_STANDIN_CACHE/crd-apiserver/<key>/bin, the key hashing
# main.go, the lock and build() below: about 3 min cold on 2 cores (peak ~1.6 GB), nothing
# when cached. The cache keeps the three binaries only.
# sid moves: when a pinned version has left it, this says so; then
#   bash scripts/standins/40-crd-apiserver.sh --repin
# finds the newest set main.go needs (crd-apiserver/repin.py), rewrites the lock and builds it.
set -euo pipefail
cd "$(dirname "$0")/../.."
recipe=scripts/standins/crd-apiserver
lock="$recipe/debs.lock"
MIRROR="${KFLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${KFLAB_STANDIN_CACHE:-/var/cache/kflab-standins}/crd-apiserver"
for tool in apt-get dpkg-deb sha256sum flock python3; do
  command -v "$tool" >/dev/null || { echo "40-crd-apiserver: needs $tool (Debian or Ubuntu); skipping"; exit 0; }
done

apt_opts() {  # a private apt state for sid under $1 (the system's sources and status untouched)
  local w=$1
  mkdir -p "$w/apt/lists/partial" "$w/apt/cache/archives/partial"
  echo "deb $MIRROR sid main" > "$w/apt/sources.list"
  : > "$w/apt/status"
  O=(-o "Dir::Etc::SourceList=$w/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$w/apt/lists" -o "Dir::Cache=$w/apt/cache"
     -o "Dir::State::status=$w/apt/status")
}

build() {  # build OUT_DIR WORK_DIR: OUT_DIR/{crd-apiserver,etcd,kubectl}
  local out=$1 w=$2 name version sha got deb goroot
  apt_opts "$w"
  apt-get "${O[@]}" update -qq
  mkdir -p "$w/debs" "$w/root" "$w/gopath/src/kflab.test/crd-apiserver"
  local want=()
  while read -r name version sha; do
    case "$name" in ''|'#'*) continue ;; esac
    want+=("$name=$version")
  done < "$lock"
  if ! (cd "$w/debs" && apt-get "${O[@]}" download -q "${want[@]}") >"$w/download.log" 2>&1; then
    grep -E '^E:' "$w/download.log" | head -5 >&2
    echo "40-crd-apiserver: a pinned package is no longer in Debian sid (above): run" \
         "bash scripts/standins/40-crd-apiserver.sh --repin" >&2
    return 1
  fi
  while read -r name version sha; do
    case "$name" in ''|'#'*) continue ;; esac
    deb=$(ls "$w/debs/${name}_"*.deb)
    got=$(sha256sum "$deb" | cut -d' ' -f1)
    [ "$got" = "$sha" ] || { echo "40-crd-apiserver: $deb has sha256 $got, the lock says $sha" >&2; return 1; }
    dpkg-deb -x "$deb" "$w/root"
  done < "$lock"
  cp "$recipe/main.go" "$w/gopath/src/kflab.test/crd-apiserver/"
  goroot=$(ls -d "$w"/root/usr/lib/go-1.* | sort -V | tail -1)
  (export GOROOT="$goroot" GOPATH="$w/gopath:$w/root/usr/share/gocode" GOCACHE="$w/gocache" \
          HOME="$w" GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOSUMDB=off CGO_ENABLED=0 GOFLAGS=
   cd "$w" && nice -n 10 "$goroot/bin/go" build -trimpath -o "$out/crd-apiserver" \
     -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v1.36.4 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36" \
     kflab.test/crd-apiserver)
  cp -L "$w/root/usr/bin/etcd" "$w/root/usr/bin/kubectl" "$out/"
}

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # two runs on one machine build once
if [ "${1:-}" = --repin ]; then
  work=$(mktemp -d "$cache/repin.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "40-crd-apiserver: re-pinning $lock from $MIRROR sid"
  python3 "$recipe/repin.py" "$work" "$lock" "$recipe/main.go"
fi

key=$( { cat "$recipe/main.go" "$lock"; declare -f build; } | sha256sum | cut -c1-16)
dir="$cache/$key"
if [ ! -f "$dir/.kflab-ok" ]; then
  start=$SECONDS
  work="$cache/build-$key"
  rm -rf "$work" "$dir"
  mkdir -p "$work" "$dir/bin"
  echo "40-crd-apiserver: building (key $key; about 3 min cold on 2 cores)"
  if ! build "$dir/bin" "$work" >"$cache/build-$key.log" 2>&1; then
    tail -20 "$cache/build-$key.log"
    rm -rf "$dir"
    exit 1
  fi
  "$dir/bin/crd-apiserver" --help >/dev/null
  "$dir/bin/etcd" --version >/dev/null
  rm -rf "$work"
  echo "$key" > "$dir/.kflab-ok"
  echo "40-crd-apiserver: built in $((SECONDS - start)) s"
fi
ln -sfn "$key" "$cache/current"
# Builds of older keys go once they are a week old (a checkout of another branch may still
# use one now: removing it would make that checkout build again).
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -mtime +7 -exec rm -rf {} +
echo "40-crd-apiserver: $dir/bin ($("$dir/bin/etcd" --version | head -n1))"
