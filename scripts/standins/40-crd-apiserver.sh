#!/usr/bin/env bash
# Stand-in: the Kubernetes v1.36 CRD API server (+ etcd 3.5) for tests/integration/apiservers.py,
# built by ../shared/recipes/crd-apiserver/build.sh, called in place (its files are never copied
# into this repository). Cached under $KFLAB_STANDIN_CACHE/crd-apiserver/<key>/bin, where the key
# hashes the recipe (build.sh, main.go, the package list): a rebuild happens only when it changes.
# The cache keeps the three binaries only (~200 MB); the 750 MB of unpacked .debs are dropped.
set -euo pipefail
cd "$(dirname "$0")/../.."
shared="${KFLAB_SHARED:-$PWD/../shared}"
recipe="$shared/recipes/crd-apiserver"
cache="${KFLAB_STANDIN_CACHE:-/var/cache/kflab-standins}/crd-apiserver"
if [ ! -f "$recipe/build.sh" ]; then
  echo "40-crd-apiserver: no recipe at $recipe (set KFLAB_SHARED); skipping"; exit 0
fi
for tool in apt-get dpkg sha256sum flock; do
  command -v "$tool" >/dev/null || { echo "40-crd-apiserver: needs $tool (Debian); skipping"; exit 0; }
done
key=$(cat "$recipe/build.sh" "$recipe/main.go" "$recipe/debian-sid-packages.txt" | sha256sum | cut -c1-16)
dir="$cache/$key"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # two runs on one machine build once

if [ ! -f "$dir/.kflab-ok" ]; then
  start=$SECONDS
  work="$cache/build-$key"
  rm -rf "$work" "$dir"
  echo "40-crd-apiserver: building (recipe key $key; about 2 min cold on 2 cores)"
  bash "$recipe/build.sh" "$work" >"$cache/build-$key.log" 2>&1 \
    || { tail -30 "$cache/build-$key.log"; exit 1; }
  mkdir -p "$dir/bin"
  # build.sh links etcd and kubectl into its unpacked tree: keep real copies, drop the tree.
  for b in crd-apiserver etcd kubectl; do cp -L "$work/bin/$b" "$dir/bin/$b"; done
  "$dir/bin/crd-apiserver" --help >/dev/null
  "$dir/bin/etcd" --version >/dev/null
  rm -rf "$work"
  echo "$key" > "$dir/.kflab-ok"
  echo "40-crd-apiserver: built in $((SECONDS - start)) s"
fi
ln -sfn "$key" "$cache/current"
# Builds of older recipes go.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
echo "40-crd-apiserver: $dir/bin ($("$dir/bin/etcd" --version | head -n1))"
