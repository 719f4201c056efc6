#!/usr/bin/env bash
# Install kflab with the local backend into ./.venv (idempotent) from the lock (locks/): exact
# versions and hashes, no resolving. Usage: bash scripts/setup.sh [extras, default: local]
# KFLAB_PYTHON picks the interpreter (default: python3), KFLAB_VENV the venv (default: .venv).
# It says what it does as it goes (each package, k of N: scripts/install_locked.py) and ends
# with the time it took: a cold install takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
took() { local s=$((SECONDS - start)); [ "$s" -ge 60 ] && echo "$((s / 60)) min $((s % 60)) s" || echo "$s s"; }
extras="${1:-local}"
py="${KFLAB_PYTHON:-python3}"
venv="${KFLAB_VENV:-.venv}"
die() { echo "setup.sh: $*" >&2; exit 1; }

# Fail fast, in one line, on what would otherwise be a pip traceback or a long wait.
command -v "$py" >/dev/null || die "no $py on PATH: install Python 3.11, 3.12 or 3.13 (Debian/Ubuntu: sudo apt install python3 python3-venv)"
"$py" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' \
  || die "$("$py" -c 'import sys; print(sys.version.split()[0])') is not supported: kflab needs Python 3.11, 3.12 or 3.13 (set KFLAB_PYTHON=/path/to/python3.X)"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$py has no venv/ensurepip module: install it (Debian/Ubuntu: sudo apt install python3-venv), then run this again"
  echo "setup.sh: making the venv $venv with $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
  "$py" -m venv "$venv" || die "$py -m venv $venv failed (above); remove $venv and run this again"
fi
"$venv/bin/python" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' \
  || die "$venv was made by an unsupported Python: remove it (rm -rf $venv) and run this again"
"$venv/bin/python" scripts/install_locked.py "$extras"
echo "installed: $("$venv/bin/kflab" version | head -n 1)"
echo "activate with: source $venv/bin/activate"
echo "(then kflab version lists the engines and pins)"
echo "setup.sh: done in $(took) (extras: $extras)"
