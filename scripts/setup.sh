#!/usr/bin/env bash
# Install kflab with the local backend into ./.venv (idempotent). Usage: bash scripts/setup.sh [extras]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
python3 -m venv .venv
# pip resolves against the repo's constraints: the same versions on every machine.
.venv/bin/python -m pip install -q --disable-pip-version-check -U "pip>=24" wheel
stamp=".venv/.kflab-installed-${extras//,/-}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[${extras}]"
  touch "$stamp"
fi
echo "installed: $(.venv/bin/kflab version | head -n 1)"
echo "activate with: source .venv/bin/activate   (kflab version lists the engines and pins)"
