#!/usr/bin/env bash
# Installs what `npm test` drives besides Node and MariaDB, from Debian's packages, when missing:
# chromium (the dashboard's browser tests), promtool (Debian's prometheus package, to check
# ops/alerts.yml) and libfaketime (the clock-step tests). Run by the tests' global setup and by
# .ci/run, so the README's test command passes on a fresh machine. Needs root and apt for an
# install; otherwise it names what to install and fails. Waits for another apt rather than failing.
set -euo pipefail

have_faketime() {
  compgen -G '/usr/lib/*/faketime/libfaketimeMT.so.1' >/dev/null || [ -e /usr/lib/faketime/libfaketimeMT.so.1 ]
}

missing=()
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
have_faketime || missing+=(faketime)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "the tests need: ${missing[*]}; install them as root: apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]} from Debian's packages (once, about a minute)" >&2
export DEBIAN_FRONTEND=noninteractive
# An install cut short (a machine stopped mid-upgrade) leaves dpkg refusing every apt-get until
# it is finished: finish it first.
if compgen -G '/var/lib/dpkg/updates/[0-9]*' >/dev/null; then
  echo "finishing an interrupted dpkg run first (dpkg --configure -a)" >&2
  dpkg --configure -a >/dev/null
fi
apt-get -o DPkg::Lock::Timeout=600 update -qq
# No recommends: prometheus would pull in node-exporter. Debian's policy-rc.d, where present,
# keeps the prometheus server from starting; only promtool is used.
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
