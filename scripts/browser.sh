#!/bin/sh
# The headless browser the viewer tests drive: Debian's chromium (Playwright's own browser download is
# not reachable here). Idempotent: installs only when /usr/bin/chromium is missing and apt-get exists.
set -e
CHROMIUM=${URCHIN_CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser.sh: $CHROMIUM is missing and apt-get is not available: install Chromium yourself" >&2
    echo "  (the viewer tests in tests/test_viewer.py will fail without it)" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
echo "browser.sh: installing Debian's chromium for the viewer tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
