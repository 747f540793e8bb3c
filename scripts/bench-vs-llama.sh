#!/usr/bin/env bash
# specmoe against llama.cpp on one model, side by side in one run: decode tokens/s (tg), prompt
# tokens/s (pp) and the verify cost curve r(T) = time(T-token batch) / time(1-token step), each
# engine measured in alternating rounds so machine load moves both. llama.cpp's r(T) comes from
# llama-bench: a T-token prompt batch takes T / pp_T seconds, a decode step 1 / tg.
#   usage: LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/bench-vs-llama.sh MODEL [THREADS] [ROUNDS]
#   env:   SPECMOE (default build/specmoe), TG (tokens per tg, 32), PP (prompt, 512; 0 = skip),
#          TS (batch sizes of the curve, "2,3,4,5,6,7,8,9"; "" = none: with PP=0 llama-bench then
#          runs no prompt batch at all, for a build whose batches fail), DRAFT (a draft GGUF: specmoe's c too),
#          LLAMA_ARGS (more llama-bench flags, e.g. "--poll 0": workers sleep instead of spinning)
# llama.cpp is built outside the repository (llama-cpp-python 0.3.36's vendor/llama.cpp) and never
# committed. Prints each round's figures, then medians and the ratios specmoe / llama.cpp, and
# the load average before and after (figures from a busy machine are noisy: quote the ratios).
set -euo pipefail

MODEL=${1:?usage: LLAMA_BIN=... $0 MODEL [THREADS] [ROUNDS]}
THREADS=${2:-2}
ROUNDS=${3:-3}
SPECMOE=${SPECMOE:-build/specmoe}
TG=${TG:-32}
PP=${PP:-512}
TS=${TS-2,3,4,5,6,7,8,9}
DRAFT=${DRAFT:-}
read -r -a LLAMA_EXTRA <<<"${LLAMA_ARGS:-}"
: "${LLAMA_BIN:?set LLAMA_BIN to the folder holding llama-bench}"
for tool in "$SPECMOE" "$LLAMA_BIN/llama-bench" python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench-vs-llama: '$tool' not found" >&2; exit 1; }
done
MAXT=1
[ -n "$TS" ] && MAXT=$(tr ',' '\n' <<<"$TS" | sort -n | tail -1)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, threads $THREADS${LLAMA_ARGS:+, llama-bench $LLAMA_ARGS}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
LLAMA_PP=${TS:-0}
[ "$PP" -gt 0 ] && LLAMA_PP="${TS:+$TS,}$PP"
for r in $(seq 1 "$ROUNDS"); do
  draft_args=()
  [ -n "$DRAFT" ] && draft_args=(-md "$DRAFT")
  "$SPECMOE" bench -m "$MODEL" -t "$THREADS" -n "$TG" -p "$PP" -r 1 --max-batch "$MAXT" "${draft_args[@]}" --json \
    >"$WORK/specmoe.$r.json"
  LD_LIBRARY_PATH="$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$LLAMA_BIN/llama-bench" -m "$MODEL" -t "$THREADS" \
    -p "$LLAMA_PP" -n "$TG" -r 1 "${LLAMA_EXTRA[@]}" -o json >"$WORK/llama.$r.json" 2>/dev/null
  echo "round $r done, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$ROUNDS" "$TS" "$PP" "$TG" <<'EOF'
import json, statistics, sys
work, rounds, ts, pp, tg = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3].split(",") if t], int(sys.argv[4]), int(sys.argv[5])
med = statistics.median
S = {"tg": [], "pp": [], "bw": [], "gbs": []}
L = {"tg": [], "pp": []}
s_r = {t: [] for t in ts}
s_rc = {t: [] for t in ts}
l_r = {t: [] for t in ts}
c = []
for r in range(1, rounds + 1):
    s = json.load(open(f"{work}/specmoe.{r}.json"))
    S["tg"].append(s["decode"]["tokens_per_second"]["median"])
    S["gbs"].append(s["decode"]["weight_gbs"])
    S["bw"].append(s["read_bandwidth_gbs"]["median"])
    if s["prefill"]:
        S["pp"].append(s["prefill"]["tokens_per_second"]["median"])
    pts = {p["tokens"]: p for p in s["cost_curve"]["points"]}
    for t in ts:
        s_r[t].append(pts[t]["r"]["median"])
        s_rc[t].append(pts[t]["r_cpu"]["median"])
    if s.get("draft"):
        c.append(s["draft"]["cost_ratio"]["median"])
    rows = json.load(open(f"{work}/llama.{r}.json"))
    tgl = next(x["avg_ts"] for x in rows if x["n_gen"] > 0)
    ppl = {x["n_prompt"]: x["avg_ts"] for x in rows if x["n_prompt"] > 0}
    L["tg"].append(tgl)
    if pp > 0:
        L["pp"].append(ppl[pp])
    for t in ts:
        l_r[t].append(tgl * t / ppl[t])
    print(f"round {r}: specmoe tg {S['tg'][-1]:.2f} t/s, llama.cpp tg {tgl:.2f} t/s"
          + (f"; pp{pp} {S['pp'][-1]:.1f} vs {ppl[pp]:.1f}" if pp > 0 else ""))
print(f"\nmedians of {rounds} rounds (one repeat each, engines alternating):")
print(f"read bandwidth (specmoe bench): {med(S['bw']):.1f} GB/s; specmoe decode reads {med(S['gbs']):.1f} GB/s of weights")
print(f"tg{tg}:  specmoe {med(S['tg']):.2f} t/s  llama.cpp {med(L['tg']):.2f} t/s  ratio {med(S['tg']) / med(L['tg']):.2f}x")
if pp > 0:
    print(f"pp{pp}: specmoe {med(S['pp']):.1f} t/s  llama.cpp {med(L['pp']):.1f} t/s  ratio {med(S['pp']) / med(L['pp']):.2f}x")
if ts:
    print("   T   r(T) specmoe (wall)  (cpu)   r(T) llama.cpp")
for t in ts:
    print(f"  {t:2d}   {med(s_r[t]):18.3f} {med(s_rc[t]):7.3f}   {med(l_r[t]):10.3f}")
if c:
    print(f"specmoe draft/target cost ratio c: {med(c):.3f}")
EOF
