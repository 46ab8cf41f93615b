#!/usr/bin/env bash
# The dashboard's browser test drives Debian's chromium. Installs it when it is missing and apt
# can be used (root, apt-get present); otherwise says what to do and fails. Called by .ci/run and
# by the browser test itself, so `npm test` passes on a fresh machine as the README says.
set -euo pipefail

browser="${CHROMIUM_PATH:-/usr/bin/chromium}"
[ -x "$browser" ] && exit 0

if [ -n "${CHROMIUM_PATH:-}" ]; then
  echo "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium is missing: install it (Debian: apt-get install chromium) or set CHROMIUM_PATH to a Chromium binary" >&2
  exit 1
fi
echo "chromium is missing; installing it from Debian's packages (once, about a minute)" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
[ -x "$browser" ] || { echo "apt-get installed chromium, but $browser is not there" >&2; exit 1; }
