#!/usr/bin/env bash
# Installs the system packages the tests use when they are missing (Debian/Ubuntu, apt); more
# packages may be named as arguments (each also the name of the command it installs).
set -euo pipefail
need=()
for pkg in prometheus prometheus-alertmanager "$@"; do
  command -v "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "missing system packages: ${need[*]} (run as root or install them with apt)" >&2; exit 1
  fi
else SUDO=; fi
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
