#!/usr/bin/env bash
# Installs the Debian 12 packages specmoe builds with (as root; skipped when all are present).
#   scripts/install-deps.sh          the build and test dependencies
#   scripts/install-deps.sh --fuzz   also clang, its libFuzzer/sanitizer runtimes and
#                                    llvm-symbolizer (scripts/fuzz.sh)
set -euo pipefail
pkgs=(build-essential cmake pkg-config git libfmt-dev libtomlplusplus-dev libgtest-dev libgmock-dev
      libbenchmark-dev libcli11-dev nlohmann-json3-dev libpcre2-dev librandom123-dev
      zlib1g-dev ninja-build)
if [[ ${1:-} == --fuzz ]]; then
  pkgs+=(clang libclang-rt-dev llvm)
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--fuzz]" >&2
  exit 2
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
