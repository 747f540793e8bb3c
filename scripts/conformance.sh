#!/usr/bin/env bash
# Perplexity of specmoe against llama.cpp's llama-perplexity on random-weight models of qwen3moe,
# olmoe, phi3, gemma2, deepseek2 (and DeepSeek-V2-Lite's form), granite, granitemoe, olmo2 (and
# OLMo 3), smollm3, stablelm, starcoder2, gemma, gptneox, phi2, ernie4_5, exaone, exaone4 (and
# EXAONE 4.0 32B's form), mistral3, command-r, cohere2, internlm2, qwen2vl, seed_oss and minicpm
# (with its multiplier keys and without), glm4 (with M-RoPE sections and without), hunyuan-dense and
# qwen3vl, and the MoE families qwen3vlmoe, deepseek, dots1, glm4moe, ernie4_5-moe, bailingmoe2 and
# hunyuan-moe, the squared-ReLU MLPs of arcee, nemotron and jais2, starcoder (multi-query gpt2), gpt-oss and minimax-m2,
# the ALiBi architectures bloom, mpt, refact and jais, falcon (and Falcon-40B's form), olmo and baichuan
# (its 7B and 13B forms), the MoE architectures dbrx and phimoe, and qwen (Qwen 1), xverse, orion,
# codeshell, plamo and chatglm, exaone-moe, the short-convolution hybrids lfm2 and lfm2moe, and
# smallthinker (its sliding-window form, with NoPE global layers, and without), the gated DeltaNet
# hybrids qwen35 (by its default interval and by attention.recurrent_layers), qwen35moe and qwen3next
# (with attn_qkv and with the older ssm_in), mellum (experts with windows and YaRN), bailingmoe (Ling v1),
# maincoder, apertus, nanbeige (looped: with the norm between passes and without), llama4 (and its
# Maverick form: 128 experts, no QK norm, chunked layers by flags), mistral4 (deepseek2's graph
# with an attention temperature), nemotron_h_moe (Nemotron 3 Nano: squared-ReLU experts), afmoe
# (Arcee Trinity: an attention output gate, pre- and post-norms, windows), maple (windows with RoPE
# on their layers only, clamped SwiGLU experts), spark2_5 (a sigmoid gate per head, windows rotating
# their own dims), the
# Mamba-2 hybrids granitehybrid (dense and MoE) and nemotron_h, and mamba2 itself,
# written in llama.cpp's layout by
# scripts/conformance-models.py (the gguf Python package), with F16 weights and after
# llama-quantize to Q8_0 and Q4_K_M (and MXFP4_MOE for gpt-oss). Prints a Markdown table (README.md,
# "Architectures").
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin PYTHON=/path/to/venv/bin/python \
#     scripts/conformance.sh [OUT_DIR] [TEXT] [ARCH...]
#
# LLAMA_BIN holds llama-perplexity and llama-quantize (llama.cpp 2026-10, built outside the
# repository); PYTHON has `gguf` and `numpy` (python3 -m venv V && V/bin/pip install gguf numpy).
# On CPUs with AMX, llama.cpp's AMX weight repacking crashes on batches of quantized rows: run with
# LLAMA_ARG_REPACK=0 there (llama-perplexity's --no-repack).
# TEXT (default: the first 8192 bytes of README.md as of commit 09643d0, a text that does not move
# when the README does) is scored at ctx 512 by both, one chunk per
# batch (-b 512: llama.cpp's context then equals the chunk, so phi3 picks the long RoPE factors as
# specmoe does for a 512-token cache), llama.cpp with -ctk f32 -ctv f32 and its default flash
# attention (which casts the cache rows to F16: comparable with specmoe's default F16 caches; for
# bit-level checks run llama.cpp with -fa off against specmoe with -ctk f32 -ctv f32), 2 threads.
# phi3 is also scored at ctx 256 (its original context: the short factors).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-/tmp/specmoe-conformance}"
TEXT="${2:-}"
shift $(( $# > 2 ? 2 : $# )) || true
ARCHS=("${@:-qwen3moe olmoe phi3 gemma2 deepseek2 deepseek2-lite granite granite-norope granitemoe olmo2 olmo3 smollm3 stablelm starcoder2 gemma gptneox phi2 ernie4_5 exaone exaone4 exaone4-32b mistral3 command-r cohere2 internlm2 qwen2vl seed_oss minicpm minicpm-defaults glm4 glm4-mrope hunyuan-dense maincoder apertus nanbeige nanbeige-skip qwen3vl qwen3vlmoe deepseek dots1 glm4moe ernie4_5-moe bailingmoe2 hunyuan-moe arcee nemotron jais2 spark2_5 starcoder gpt-oss minimax-m2 bloom mpt refact jais falcon falcon40b olmo baichuan baichuan13b dbrx phimoe qwen xverse orion codeshell plamo chatglm exaone-moe lfm2 lfm2moe smallthinker smallthinker-swa qwen35 qwen35-mix qwen35moe qwen3next qwen3next-legacy mellum bailingmoe llama4 llama4-maverick mistral4 afmoe maple granitehybrid granitehybrid-moe mamba2 nemotron_h nemotron_h_moe}")
ARCHS=(${ARCHS[*]})
LLAMA_BIN="${LLAMA_BIN:-$HOME/.cache/specmoe-peer/llama.cpp/build/bin}"
PYTHON="${PYTHON:-python3}"
SPECMOE="${SPECMOE:-$ROOT/build/specmoe}"
THREADS="${THREADS:-2}"
# Hundreds of MB of models: never inside the repository (a first argument meant as an
# architecture would otherwise become an output folder in the work tree).
case "$(realpath -m "$OUT")/" in
  "$ROOT"/*) echo "conformance: OUT_DIR '$OUT' is inside the repository ($ROOT); pick a folder outside it" >&2; exit 1 ;;
esac
mkdir -p "$OUT"
if [[ -z "$TEXT" ]]; then
  TEXT="$OUT/text.txt"
  git -C "$ROOT" show 09643d0:README.md > "$OUT/README-09643d0.md" ||
    { echo "conformance: commit 09643d0 not in this checkout; pass a TEXT file" >&2; exit 1; }
  head -c 8192 "$OUT/README-09643d0.md" > "$TEXT"
fi
for tool in "$LLAMA_BIN/llama-perplexity" "$LLAMA_BIN/llama-quantize" "$SPECMOE"; do
  [[ -x "$tool" ]] || { echo "conformance: $tool not found (set LLAMA_BIN / SPECMOE)" >&2; exit 1; }
done

"$PYTHON" "$ROOT/scripts/conformance-models.py" "$OUT" "${ARCHS[@]}" > /dev/null

llama_ppl() {  # model ctx
  # llama.cpp's logger writes from a worker thread that the process does not join at exit
  # (common/log.cpp), so on a loaded machine the last lines (the last chunk, the final estimate)
  # can be lost; OpenMP's spinning workers make that likely, so they wait passively. The running
  # value after the last chunk is the final estimate; run again while neither is there.
  local log v="" n last
  for _ in 1 2 3 4 5 6; do
    log=$(OMP_WAIT_POLICY=passive nice -n 10 "$LLAMA_BIN/llama-perplexity" -m "$1" -f "$TEXT" -c "$2" -b "$2" \
          -t "$THREADS" -ctk f32 -ctv f32 2>&1) || true
    v=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' <<< "$log")
    [[ -n "$v" ]] && break
    n=$(sed -n 's/.*calculating perplexity over \([0-9]*\) chunks.*/\1/p' <<< "$log")
    last=$(grep -o "\[$n\][0-9.]*" <<< "$log" | sed 's/.*\]//') || true
    [[ -n "$n" && -n "$last" ]] && { v="$last"; break; }
  done
  echo "$v"
}
specmoe_ppl() {  # model ctx
  nice -n 10 "$SPECMOE" perplexity -m "$1" -f "$TEXT" -c "$2" --threads "$THREADS" 2>/dev/null | sed -n 's/^perplexity: //p'
}

echo "| architecture | weights | ctx | llama.cpp | specmoe | difference |"
echo "|---|---|---:|---:|---:|---:|"
for arch in "${ARCHS[@]}"; do
  f16="$OUT/$arch-f16.gguf"
  types=(F16 Q8_0 Q4_K_M)
  [[ "$arch" == gpt-oss ]] && types+=(MXFP4_MOE)  # gpt-oss's own format: MXFP4 experts
  for type in "${types[@]}"; do
    model="$f16"
    if [[ "$type" != F16 ]]; then
      model="$OUT/$arch-${type,,}.gguf"
      nice -n 10 "$LLAMA_BIN/llama-quantize" "$f16" "$model" "$type" "$THREADS" > "$OUT/$arch-${type,,}.quantize.log" 2>&1
    fi
    ctxs=(512)
    [[ "$arch" == phi3 || "$arch" == phimoe ]] && ctxs=(256 512)
    for ctx in "${ctxs[@]}"; do
      a=$(llama_ppl "$model" "$ctx")
      b=$(specmoe_ppl "$model" "$ctx")
      d=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.3f%%", 100 * (b - a) / a }')
      echo "| $arch | $type | $ctx | $a | $b | $d |"
    done
  done
done
