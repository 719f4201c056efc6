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
# Test files run on several workers (pytest-xdist), a whole file per worker (--dist loadfile):
# a module's stand-ins (its API servers, its one VM) start once, on the worker that runs it.
# Workers: the machine's cores, at most 4 (each may hold a stand-in cluster); KFLAB_TEST_WORKERS
# overrides it (0 or 1 runs everything in this process, as plain pytest does).
workers="${KFLAB_TEST_WORKERS:-$(nproc)}"
[ "$workers" -gt 4 ] && workers=4
xdist=()
[ "$workers" -gt 1 ] && xdist=(-n "$workers" --dist loadfile)
exec .venv/bin/python -m pytest "${xdist[@]}" "$@"
