#!/usr/bin/env bash
# Install the Debian packages listed in tools/debian-packages.txt that are missing.
# Idempotent: nothing runs when every package is already installed. Needs root or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' tools/debian-packages.txt | grep -v '^$' || true)
[ "${#wanted[@]}" -gt 0 ] || exit 0
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ "${#missing[@]}" -gt 0 ] || exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-debian-packages: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# --no-install-recommends: only the binaries; policy-rc.d keeps package scripts from starting services.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  $sudo sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
