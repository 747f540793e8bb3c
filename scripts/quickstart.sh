#!/usr/bin/env bash
# The quickstart: installs what is missing (Debian 12, as root), builds, synthesizes the default
# target/draft pair into the model cache (outside the source tree), generates text, runs
# speculative decoding against the autoregressive baseline, and runs the quickstart experiment.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

cache="${SPECMOE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/specmoe}"
mkdir -p "$cache"
target="$cache/synth-target-seed1.gguf"
draft="$cache/synth-draft-seed1.gguf"
[ -f "$target" ] || ./build/specmoe synth --preset target --seed 1 -o "$target"
[ -f "$draft" ] || ./build/specmoe synth --preset draft --seed 1 -o "$draft"

echo
echo "== specmoe info (the synthetic target)"
./build/specmoe info -m "$target" | head -9
echo
echo "== specmoe generate (greedy, 32 tokens)"
./build/specmoe generate -m "$target" -p "Once upon a time" -n 32 --temp 0
echo
echo "== specmoe speculate --compare (model drafter, g = 3, greedy; median of 3 alternated baseline/speculative pairs)"
./build/specmoe speculate -m "$target" -md "$draft" -p "Once upon a time" -n 64 --temp 0 --draft-max 3 --compare --repeat 3
echo
echo "== specmoe run experiments/configs/quickstart.toml (4 strategies x 2 temperatures)"
out="${SPECMOE_QUICKSTART_OUT:-$cache/quickstart-report}"
./build/specmoe run experiments/configs/quickstart.toml -o "$out"
echo
sed -n '/^| run/,/^$/p' "$out/report.md"
echo "HTML report: $out/report.html"
