#!/usr/bin/env bash
# Headless Chromium for tests/integration/test_html_reports.py: the HTML reports and the class
# grade page are opened in a real browser (Debian's chromium). Idempotent: installs only when
# missing, and skips (the tests then skip with the reason) without root.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium present: $(chromium --version 2>/dev/null | head -n1)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "50-chromium: need root to install chromium; skipping"; exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -o DPkg::Lock::Timeout=600 -qq
apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends chromium >/dev/null
echo "chromium installed: $(chromium --version 2>/dev/null | head -n1)"
