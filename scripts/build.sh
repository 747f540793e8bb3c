#!/usr/bin/env bash
# Configures and builds the specmoe CLI into build/ (Release; SPECMOE_BUILD_TARGET=all for
# everything). The CUDA backend is built when a GPU is
# present (nvidia-smi answers) or SPECMOE_CUDA=ON is exported; otherwise the CPU build is made.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda="${SPECMOE_CUDA:-}"
if [ -z "$cuda" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then cuda=AUTO; else cuda=OFF; fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPECMOE_CUDA="$cuda" >/dev/null
cmake --build build -j"$(nproc)" --target "${SPECMOE_BUILD_TARGET:-specmoe}"
