#!/usr/bin/env bash
# Compares `specmoe tokenize` with llama.cpp's `llama-tokenize` on whole text files, for every real
# model of scripts/fetch-models.sh that is present: once as a chat prompt is tokenized (the model's
# BOS, special tokens parsed) and once as plain text (no BOS, special tokens as text). Prints one
# line per (model, file, mode) with OK or DIFF and the token count; exits 1 on any DIFF.
#   usage: scripts/tokenizer-compare.sh FILE...
# Environment: LLAMA_BIN (default ~/.cache/specmoe-peer/llama.cpp/build/bin), SPECMOE_MODELS
# (default ~/.cache/specmoe/models), SPECMOE (default build/specmoe).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LLAMA_BIN:-${HOME}/.cache/specmoe-peer/llama.cpp/build/bin}
MODELS=${SPECMOE_MODELS:-${HOME}/.cache/specmoe/models}
SPECMOE=${SPECMOE:-build/specmoe}
[ $# -ge 1 ] || { echo "usage: $0 FILE..." >&2; exit 2; }
[ -x "$BIN/llama-tokenize" ] || { echo "tokenizer-compare: no llama-tokenize in $BIN" >&2; exit 1; }
[ -x "$SPECMOE" ] || { echo "tokenizer-compare: no $SPECMOE (build it first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for m in Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf \
         SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
  model=$MODELS/$m
  [ -f "$model" ] || { echo "$m: not found in $MODELS, skipped"; continue; }
  for f in "$@"; do
    for mode in special plain; do
      if [ "$mode" = special ]; then
        ref_flags=()
        ours=(--parse-special)
        # llama-tokenize adds BOS when the vocabulary asks for it (then an empty text gives one
        # token); specmoe tokenize adds it with --bos.
        : >"$tmp/empty"
        [ "$("$BIN/llama-tokenize" -m "$model" -f "$tmp/empty" --ids --log-disable 2>/dev/null | tail -n 1)" = "[]" ] ||
          ours+=(--bos)
      else
        ref_flags=(--no-bos --no-parse-special)
        ours=()
      fi
      "$BIN/llama-tokenize" -m "$model" -f "$f" --ids --no-escape --log-disable "${ref_flags[@]}" 2>/dev/null |
        tail -n 1 | tr -d '[],' | tr -s ' ' '\n' | sed '/^$/d' >"$tmp/ref"
      "$SPECMOE" tokenize -m "$model" -f "$f" "${ours[@]}" | tr -s ' ' '\n' | sed '/^$/d' >"$tmp/ours"
      if cmp -s "$tmp/ref" "$tmp/ours"; then verdict=OK; else verdict=DIFF; status=1; fi
      echo "$m $(basename "$f") $mode: $verdict ($(wc -l <"$tmp/ref") tokens)"
    done
  done
done
exit $status
