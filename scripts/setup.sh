#!/usr/bin/env bash
# scripts/setup.sh — installs the Debian packages Kiln needs, only those that are missing.
# Extra package names given as arguments are installed too (e.g. dataset-fashion-mnist).
set -euo pipefail

packages=(cmake g++ ninja-build pkg-config libeigen3-dev libgtest-dev libgmock-dev
          libbenchmark-dev zlib1g-dev nlohmann-json3-dev "$@")
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "kiln: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
