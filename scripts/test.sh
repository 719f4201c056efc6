#!/usr/bin/env bash
# The test command: install everything the tests need (idempotent), start stand-ins, run pytest.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests run as a learner's shell does: no bytecode suppressed, no build machine's pip or
# BLAS settings (scripts/learner-env.sh says which and why; torch keeps its wheelhouse).
source scripts/learner-env.sh
# Real stand-ins for what cannot be reached here (apiserver, systemd target, libvirt...):
# each script installs (with a cache) what its tests need and exports nothing but files.
# Those that do not use the venv run one after another in the background while setup.sh
# installs it: cold, their downloads and Go builds overlap pip's. One chain, not one job per
# script: their apt steps must not race for dpkg's lock. A script with the line
# "# kflab-standin: after-setup" (it installs into .venv) runs once setup.sh is done.
early=() late=()
for standin in scripts/standins/*.sh; do
  [ -e "$standin" ] || continue
  if grep -q '^# kflab-standin: after-setup' "$standin"; then late+=("$standin"); else early+=("$standin"); fi
done
run_standins() {
  local standin t
  for standin in "$@"; do
    echo "== stand-in: $standin"
    t=$SECONDS
    bash "$standin"
    echo "== stand-in: $standin took $((SECONDS - t)) s"
  done
}
mkdir -p .cache
chain_log=.cache/standins.log
t_all=$SECONDS
setsid -w bash -c "$(declare -f run_standins); set -euo pipefail; run_standins \"\$@\"" _ "${early[@]}" \
  >"$chain_log" 2>&1 &
chain=$!
# If setup fails (set -e), the chain goes with it: its own process group, ended by PID.
trap 'kill -- -"$chain" 2>/dev/null || true' EXIT
t=$SECONDS
bash scripts/setup.sh local,dev,tf,notebooks,sdk
echo "== setup: $((SECONDS - t)) s"
# The upstream trees the tests read (Kubeflow manifests, CRDs, the KFP API): ../shared where it
# is present, else fetched at their pinned commits and verified (tests/data/upstream.yaml). With
# no network the tests that need them skip and say why; nothing else stops.
.venv/bin/python scripts/fetch_upstream.py || echo "== upstream test data: not fetched (above); the tests that read it skip"
chain_rc=0
wait "$chain" || chain_rc=$?
trap - EXIT
cat "$chain_log"
[ "$chain_rc" = 0 ] || { echo "== stand-ins failed (exit $chain_rc): see above"; exit "$chain_rc"; }
run_standins "${late[@]}"
echo "== stand-ins: $((SECONDS - t_all)) s from the start of setup"
echo "== python: $(.venv/bin/python -c 'import sys; print(sys.version.split()[0], sys._base_executable)'), $(id -un), HOME=$HOME"
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
