#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs each for SECONDS.
#   scripts/fuzz.sh SECONDS [TARGET...]      targets: gguf model quant router results tree
#                                            tokenizer toml prompts chat_template kld (default: all)
#   scripts/fuzz.sh --seeds                  regenerate tests/fuzz/corpus/ from tests/fuzz/make_corpus.cpp
#                                            (its gguf/ folder is not committed: .gitignore)
# Environment: JOBS (fuzzers run at once, default 1), BUILD_DIR (default build-fuzz),
#   SPECMOE_FUZZ_VOCAB (a GGUF vocabulary added to the tokenizer target, e.g.
#   ../shared/data/tokenizer/ggml-vocab-gpt-2.gguf), NICE (default 10), BUILD_JOBS (compile
#   jobs, default 2), TIMEOUT (seconds one input may run, default 30).
# Each target's working corpus lives in BUILD_DIR/corpus/<target> (seeded from BUILD_DIR/seeds,
# which make_corpus.cpp writes before every run, and from tests/regression/<target>/);
# crashes, leaks, timeouts and OOMs are written to BUILD_DIR/findings/<target>/ (libFuzzer's
# slow-unit-* files there, inputs over 10 s, are kept but not counted as findings). Copy a fixed
# finding into tests/regression/<target>/ so tests/unit/fuzz_regression_test.cpp replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-1}
NICE=${NICE:-10}
ALL_TARGETS=(gguf model quant router results tree tokenizer toml prompts chat_template kld)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage

configure_and_build() {
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    local launcher=()
    command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S . -B "$BUILD_DIR" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECMOE_FUZZ=ON -DSPECMOE_CUDA=OFF "${launcher[@]}" >/dev/null
  fi
  local targets=(fuzz_corpus)
  for t in "$@"; do targets+=("fuzz_$t"); done
  cmake --build "$BUILD_DIR" -j"${BUILD_JOBS:-2}" --target "${targets[@]}"
}

if [[ $1 == --seeds ]]; then
  configure_and_build
  rm -rf tests/fuzz/corpus
  "$BUILD_DIR/fuzz/fuzz_corpus" tests/fuzz/corpus
  find tests/fuzz/corpus -type f | sort | xargs ls -l | awk '{print $5, $9}'
  exit 0
fi

SECONDS_PER_TARGET=$1
shift
[[ $SECONDS_PER_TARGET =~ ^[0-9]+$ ]] || usage
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "unknown target '$t' (known: ${ALL_TARGETS[*]})"; exit 2; }
done

configure_and_build "${TARGETS[@]}"
rm -rf "$BUILD_DIR/seeds"
"$BUILD_DIR/fuzz/fuzz_corpus" "$BUILD_DIR/seeds"

# Large enough for every seed (libFuzzer truncates longer inputs): model seeds are whole models.
max_len() {
  case $1 in
    gguf) echo 16384 ;;
    model) echo 98304 ;;
    quant) echo 8192 ;;
    kld) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

run_one() {
  local t=$1
  local corpus=$BUILD_DIR/corpus/$t findings=$BUILD_DIR/findings/$t log=$BUILD_DIR/logs/$t.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  local dicts=() inputs=("$BUILD_DIR/seeds/$t")
  [[ -f tests/fuzz/$t.dict ]] && dicts=(-dict="tests/fuzz/$t.dict")
  [[ -d tests/fuzz/corpus/$t ]] && inputs+=("tests/fuzz/corpus/$t")
  [[ -d tests/regression/$t ]] && inputs+=("tests/regression/$t")
  # -rss_limit_mb/-malloc_limit_mb: a loader that allocates beyond 2 GiB is a finding (OOM), as is
  # any input running over TIMEOUT s of wall time (default 30: a 7,000-run sweep, within the
  # 10,000-run limit, took 3.5 s of CPU under ASan and 11 s on a loaded machine). Exit status is
  # non-zero on a finding; keep going.
  nice -n "$NICE" "$BUILD_DIR/fuzz/fuzz_$t" "$corpus" "${inputs[@]}" \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout="${TIMEOUT:-30}" \
    -max_len="$(max_len "$t")" -artifact_prefix="$findings/" -print_final_stats=1 "${dicts[@]}" \
    >"$log" 2>&1 || true
}

summary() {
  local t=$1 log=$BUILD_DIR/logs/$1.log
  local execs time corpus findings
  # A target stopped by a finding prints no final stats: "?" then, not an exit (set -e).
  execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  time=$(grep -ao 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | grep -o 'in [0-9]*' | grep -o '[0-9]*' || true)
  corpus=$(find "$BUILD_DIR/corpus/$t" -type f | wc -l)
  findings=$(find "$BUILD_DIR/findings/$t" -type f ! -name "slow-unit-*" -newer "$STAMP" | wc -l)  # from this run only
  local crash_lines
  # The cause (a sanitizer report, an oracle's message, the exception that reached std::terminate)
  # and libFuzzer's base64 of a small crashing input, so a CI log alone reproduces the finding.
  crash_lines=$(grep -aE '^==[0-9]+==ERROR|^SUMMARY|deadly signal|fuzz oracle failed|libFuzzer: (timeout|out-of-memory)|terminate called|^  what\(\)|^Base64:' "$log" | head -6 || true)
  printf '%-10s seconds=%-6s execs=%-10s corpus=%-6s findings=%s\n' "$t" "${time:-?}" "${execs:-?}" "$corpus" "$findings"
  [[ -n $crash_lines ]] && printf '           %s\n' "$crash_lines"
  return 0
}

echo "fuzzing ${TARGETS[*]} for ${SECONDS_PER_TARGET}s each, $JOBS at a time (logs: $BUILD_DIR/logs)"
STAMP=$BUILD_DIR/logs/.started
mkdir -p "$BUILD_DIR/logs"
touch "$STAMP"
running=0
for t in "${TARGETS[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $JOBS ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

echo "== summary"
status=0
for t in "${TARGETS[@]}"; do
  summary "$t"
  [[ -z $(find "$BUILD_DIR/findings/$t" -type f ! -name "slow-unit-*" -newer "$STAMP") ]] || status=1
done
exit $status
