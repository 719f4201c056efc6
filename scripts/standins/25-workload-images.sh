#!/usr/bin/env bash
# Stand-in: the workload images the container-runner tests run (no registry is reachable here),
# built offline from Debian's packages on the debootstrap base that 20-systemd-target.sh
# imports: localhost/kflab-python:bookworm (Debian's python3) and localhost/kflab-torch:bookworm
# (that plus the CPU wheel torch==2.13.0 from /opt/wheels, or $KFLAB_TORCH_WHEEL, and numpy),
# localhost/kflab-custom-predictor:bookworm (a user's KServe custom predictor: predictor.py). Idempotent
# and cached by content key: an image is rebuilt only when its Containerfile (and, for torch,
# the wheel and the pip set) changes. Needs root (rootful podman's store, as 20-*.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/integration/workload_images
export CONTAINERS_CONF="$PWD/tests/integration/systemd_target/containers.conf"
base=localhost/kflab-debootstrap:bookworm
python_image=localhost/kflab-python:bookworm
torch_image=localhost/kflab-torch:bookworm
predictor_image=localhost/kflab-custom-predictor:bookworm
wheel=${KFLAB_TORCH_WHEEL:-$(ls /opt/wheels/torch-2.13.0+cpu-cp311-*"$(uname -m)".whl 2>/dev/null | head -n1 || true)}

if ! podman image exists "$base"; then
  bash scripts/standins/20-systemd-target.sh  # makes the debootstrap base
fi

label() { podman image inspect --format '{{ index .Labels "kflab.content" }}' "$1" 2>/dev/null || true; }

py_key=$( { podman image inspect --format '{{.Id}}' "$base"; cat "$here/python.Containerfile"; } | sha256sum | cut -c1-16)
if [ "$(label "$python_image")" = "$py_key" ]; then
  echo "python image cached: $python_image ($py_key)"
else
  echo "building $python_image (Debian's python3)"
  podman build -q --label "kflab.content=$py_key" -t "$python_image" -f "$here/python.Containerfile" "$here" >/dev/null
  echo "python image built: $python_image ($py_key)"
fi

pred_key=$( { echo "$py_key"; cat "$here/predictor.Containerfile" "$here/predictor.py"; } | sha256sum | cut -c1-16)
if [ "$(label "$predictor_image")" = "$pred_key" ]; then
  echo "predictor image cached: $predictor_image ($pred_key)"
else
  podman build -q --label "kflab.content=$pred_key" -t "$predictor_image" -f "$here/predictor.Containerfile" "$here" >/dev/null
  echo "predictor image built: $predictor_image ($pred_key)"
fi

if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
  echo "no torch 2.13.0 CPU wheel in /opt/wheels (set KFLAB_TORCH_WHEEL): the torch image is not built; its tests skip" >&2
  exit 0
fi
numpy=2.4.6  # the lock's numpy for Python 3.11 (locks/linux-x86_64/local.txt)
torch_key=$( { echo "$py_key"; echo "$numpy"; cat "$here/torch.Containerfile"; sha256sum "$wheel" | cut -c1-64; } | sha256sum | cut -c1-16)
if [ "$(label "$torch_image")" = "$torch_key" ]; then
  echo "torch image cached: $torch_image ($torch_key)"
  exit 0
fi
ctx=$(mktemp -d /var/tmp/kflab-torch-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$here/torch.Containerfile" "$ctx/"
echo "pip-installing $(basename "$wheel") and its dependencies for the image (Debian's pip, from PyPI)"
# Debian's pip targets Debian's python3 (3.11, the image's); --target keeps it out of the host.
/usr/bin/python3 -m pip install -q --isolated --no-compile \
  --disable-pip-version-check --root-user-action=ignore --target "$ctx/site" "$wheel" "numpy==$numpy"
# What no workload here needs: headers, CMake files, the bundled test data.
rm -rf "$ctx/site/torch/include" "$ctx/site/torch/share" "$ctx/site/torch/test" "$ctx/site/bin" \
  "$ctx/site"/*/tests "$ctx/site/sympy/"*/tests
podman build -q --label "kflab.content=$torch_key" -t "$torch_image" -f "$ctx/torch.Containerfile" "$ctx" >/dev/null
echo "torch image built: $torch_image ($torch_key)"
