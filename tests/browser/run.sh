#!/usr/bin/env bash
# `roce view` in a real browser: Debian's chromium, headless, driven through chromium-driver
# by python3-selenium (tests/browser/view_needs_browser.py). Installs the three Debian
# packages when they are missing (needs root then); nothing is downloaded at run time.
# Screenshots go to $ROCE_ARTIFACTS (default target/browser-artifacts). About 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null ||
  ! /usr/bin/python3 -c "import selenium" 2>/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/browser/run.sh: chromium, chromium-driver and python3-selenium are missing; run as root to install them" >&2
    exit 1
  fi
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver python3-selenium >/dev/null
fi
# Fail loudly rather than skip if the install did not give us a browser.
chromium --version
chromedriver --version

cargo build -q -p roce-tools --bin roce
# Debian's selenium lives in the system python, not in a pyenv or venv one.
exec /usr/bin/python3 tests/browser/view_needs_browser.py target/debug/roce
