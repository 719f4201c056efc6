#!/usr/bin/env bash
# The test command: install everything the tests need (idempotent), start stand-ins, run pytest.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
t=$SECONDS
bash scripts/setup.sh local,dev,tf,notebooks,sdk
echo "== setup: $((SECONDS - t)) s"
# Real stand-ins for what cannot be reached here (apiserver, systemd target, libvirt...):
# each script installs (with a cache) what its tests need and exports nothing but files.
for standin in scripts/standins/*.sh; do
  [ -e "$standin" ] || continue
  echo "== stand-in: $standin"
  t=$SECONDS
  bash "$standin"
  echo "== stand-in: $standin took $((SECONDS - t)) s"
done
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/ruff check lab tests bench scenarios scripts
exec .venv/bin/python -m pytest "$@"
