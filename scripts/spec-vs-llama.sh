#!/usr/bin/env bash
# Speculative decoding end to end, specmoe against llama.cpp on the same prompts in one run: for
# each prompt, specmoe `speculate --compare` (its autoregressive baseline and the model drafter at
# every draft length of G) and llama.cpp's `llama-speculative-simple` at every draft length of LG,
# engines alternating prompt by prompt; llama.cpp's autoregressive speed from `llama-bench` tg,
# measured between the prompts. Reports decode-phase tokens/s (prompt processing excluded, as both
# tools print it) summed over the prompts (total tokens / total seconds), the speedups of specmoe's
# best draft length over its own autoregressive decoding and over llama.cpp's best configuration,
# and acceptance.
#   usage: LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/spec-vs-llama.sh TARGET DRAFT PROMPTS [N]
#          PROMPTS: a JSONL file (.gz too) of HumanEval ("prompt") or MT-bench ("turns": the first)
#          questions; N: how many (default 10), from the first.
#   env:   G (specmoe draft lengths, "3 4 5"), LG (llama.cpp's, "2 3 4 5"), TEMP (0), N_PREDICT
#          (128), THREADS (2), CHAT (specmoe --chat-template, default none: the raw text, as
#          llama-speculative-simple reads it), SEED (1), SPECMOE (default build/specmoe),
#          LLAMA_DRAFT (a different draft file for llama.cpp; default DRAFT), SPECMOE_ARGS (more
#          `specmoe speculate` options for every specmoe run, e.g. "--draft-vocab 65536"; the
#          autoregressive baseline of --compare does not read the draft options).
# llama.cpp is built outside the repository (llama-cpp-python 0.3.36's vendor/llama.cpp,
# ../shared/tools/llamacpp-peer.sh) and never committed. At temperature > 0 both sample with
# top-k 40, top-p 0.95, min-p 0.05 (the defaults of both).
set -euo pipefail

TARGET=${1:?usage: LLAMA_BIN=... $0 TARGET DRAFT PROMPTS [N]}
DRAFT=${2:?usage: LLAMA_BIN=... $0 TARGET DRAFT PROMPTS [N]}
PROMPTS=${3:?usage: LLAMA_BIN=... $0 TARGET DRAFT PROMPTS [N]}
N=${4:-10}
G=${G:-3 4 5}
LG=${LG:-2 3 4 5}
TEMP=${TEMP:-0}
N_PREDICT=${N_PREDICT:-128}
THREADS=${THREADS:-2}
CHAT=${CHAT:-none}
SEED=${SEED:-1}
SPECMOE=${SPECMOE:-build/specmoe}
LLAMA_DRAFT=${LLAMA_DRAFT:-$DRAFT}
read -r -a specmoe_args <<<"${SPECMOE_ARGS:-}"
: "${LLAMA_BIN:?set LLAMA_BIN to the folder holding llama-speculative-simple and llama-bench}"
for tool in "$SPECMOE" "$LLAMA_BIN/llama-speculative-simple" "$LLAMA_BIN/llama-bench" python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "spec-vs-llama: '$tool' not found" >&2; exit 1; }
done
export LD_LIBRARY_PATH="$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 - "$PROMPTS" "$N" "$WORK" <<'EOF'
import gzip, json, sys
path, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
for i, row in enumerate(rows[:n]):
    text = row["prompt"] if "prompt" in row else row["turns"][0]
    open(f"{work}/prompt{i}.txt", "w", encoding="utf-8").write(text)
EOF
n_prompts=$(ls "$WORK"/prompt*.txt | wc -l)

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, threads $THREADS"
echo "target $TARGET, draft $DRAFT (llama.cpp: $LLAMA_DRAFT), $n_prompts prompts of $PROMPTS, temperature $TEMP, $N_PREDICT tokens${SPECMOE_ARGS:+, specmoe options: $SPECMOE_ARGS}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
llama_sampling=(--temp "$TEMP" --top-k 40 --top-p 0.95 --min-p 0.05 --seed "$SEED")
for i in $(seq 0 $((n_prompts - 1))); do
  for g in $G; do
    "$SPECMOE" speculate -m "$TARGET" -md "$DRAFT" -f "$WORK/prompt$i.txt" -n "$N_PREDICT" --temp "$TEMP" \
      --seed "$SEED" -t "$THREADS" --draft-max "$g" --compare --chat-template "$CHAT" --json \
      "${specmoe_args[@]}" >"$WORK/specmoe.$i.$g.json" 2>/dev/null
  done
  for g in $LG; do
    "$LLAMA_BIN/llama-speculative-simple" -m "$TARGET" -md "$LLAMA_DRAFT" -f "$WORK/prompt$i.txt" -n "$N_PREDICT" \
      -t "$THREADS" -td "$THREADS" -c 4096 --spec-type draft-simple --spec-draft-n-max "$g" "${llama_sampling[@]}" >"$WORK/llama.$i.$g.out" \
      2>"$WORK/llama.$i.$g.err" || true
  done
  "$LLAMA_BIN/llama-bench" -m "$TARGET" -t "$THREADS" -p 0 -n "$N_PREDICT" -r 1 -o json >"$WORK/llama-ar.$i.json" 2>/dev/null
  echo "prompt $i done, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$n_prompts" "$G" "$LG" "$TEMP" <<'EOF'
import json, re, statistics, sys
work, n, gs, lgs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
greedy = float(sys.argv[5]) == 0.0
def rate(tokens, seconds):
    return sum(tokens) / sum(seconds) if sum(seconds) > 0 else float("nan")
# specmoe: decode-phase tokens and seconds per prompt (tokens / decode tokens/s).
base_tok, base_s = [], []
spec = {g: {"tok": [], "s": [], "drafted": 0, "accepted": 0, "identical": True, "of_pred": []} for g in gs}
for i in range(n):
    for g in gs:
        d = json.load(open(f"{work}/specmoe.{i}.{g}.json"))
        b, m = d["baseline"]["metrics"], d["metrics"]
        if g == gs[0]:
            base_tok.append(b["n_decoded"]); base_s.append(b["n_decoded"] / b["decode_tokens_per_second"])
        spec[g]["tok"].append(m["n_decoded"]); spec[g]["s"].append(m["n_decoded"] / m["decode_tokens_per_second"])
        spec[g]["drafted"] += m["n_drafted"]; spec[g]["accepted"] += m["n_accepted"]
        spec[g]["identical"] &= bool(d.get("identical_to_baseline", True))
        # measured decode speedup over the one Thm 3.8 predicts with the run's own c and r(g+1)
        pred = m.get("predicted_speedup_measured_cost", 0.0)
        if pred > 0 and b["decode_tokens_per_second"] > 0:
            spec[g]["of_pred"].append(m["decode_tokens_per_second"] / b["decode_tokens_per_second"] / pred)
llama = {g: {"tok": [], "s": [], "drafted": 0, "accepted": 0} for g in lgs}
for i in range(n):
    for g in lgs:
        err = open(f"{work}/llama.{i}.{g}.err", errors="replace").read()
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", err)
        if not m:
            print(f"llama-speculative-simple prompt {i} draft-max {g}: no timing line (see its stderr)"); continue
        llama[g]["tok"].append(int(m.group(1))); llama[g]["s"].append(float(m.group(2)))
        dm, am = re.search(r"n_drafted\s*=\s*(\d+)", err), re.search(r"n_accept\s*=\s*(\d+)", err)
        if dm and am: llama[g]["drafted"] += int(dm.group(1)); llama[g]["accepted"] += int(am.group(1))
llama_ar = statistics.median(
    next(x["avg_ts"] for x in json.load(open(f"{work}/llama-ar.{i}.json")) if x["n_gen"] > 0) for i in range(n))
ar = rate(base_tok, base_s)
print(f"\ndecode-phase tokens/s over {n} prompts (total tokens / total seconds):")
print(f"  specmoe autoregressive            {ar:7.2f}")
best_g, best = None, 0.0
for g in gs:
    r = rate(spec[g]["tok"], spec[g]["s"])
    acc = spec[g]["accepted"] / max(1, spec[g]["drafted"])
    same = ("yes" if spec[g]["identical"] else "NO") if greedy else "n/a, sampled"
    of_pred = statistics.median(spec[g]["of_pred"]) if spec[g]["of_pred"] else float("nan")
    print(f"  specmoe speculative g={g:<2}          {r:7.2f}  ({r / ar:.2f}x its autoregressive; acceptance {acc:.3f}; "
          f"identical to autoregressive: {same}; measured / predicted_speedup_measured_cost, median over "
          f"prompts: {of_pred:.2f})")
    if r > best: best_g, best = g, r
print(f"  llama.cpp autoregressive (tg)     {llama_ar:7.2f}  (median of the llama-bench tg runs)")
lbest_name, lbest = "autoregressive", llama_ar
for g in lgs:
    if not llama[g]["s"]: continue
    r = rate(llama[g]["tok"], llama[g]["s"])
    acc = llama[g]["accepted"] / max(1, llama[g]["drafted"])
    print(f"  llama.cpp speculative draft-max={g:<2} {r:7.2f}  (acceptance {acc:.3f})")
    if r > lbest: lbest_name, lbest = f"speculative draft-max {g}", r
print(f"\nspecmoe best (g={best_g}): {best:.2f} t/s = {best / ar:.2f}x specmoe autoregressive, "
      f"{best / lbest:.2f}x llama.cpp's best ({lbest_name}, {lbest:.2f} t/s)")
EOF
