#!/usr/bin/env bash
# A real terminal for tests/integration/test_tmux_walkthrough.py: tmux (Debian package), in
# which a whole guided scenario is driven as a learner types it (send-keys) and read back as
# the screen shows it (capture-pane). Idempotent: nothing happens when tmux is on PATH.
set -euo pipefail
if command -v tmux >/dev/null; then
  echo "tmux present: $(tmux -V)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "tmux missing and not root: the tmux walkthrough tests will skip" >&2
  exit 0
fi
echo "installing tmux (Debian package)"
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q tmux >/dev/null \
  || { apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
       DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q tmux >/dev/null; }
echo "tmux installed: $(tmux -V)"
