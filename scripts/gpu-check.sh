#!/usr/bin/env bash
# GPU check: builds the CUDA backend for sm_90 (H100/H200) in build-gpu/, runs the GPU test
# executables (the differential op harness: every Backend op on the CPU and the GPU against the
# kernels/cpu references, with its performance table in test_backend_ops.log; the CUDA ops outside
# the Backend; the CUDA model forward against the CPU forward;
# device-resident speculative decoding: the device verifier's losslessness, the whole loop),
# then a short benchmark on the synthetic ~1.1B-parameter F16 model `target-1b`: decode tokens/s
# and achieved weight-read bandwidth, 1/9/64-token forwards, and the cost of a 9-token verify
# forward relative to a 1-token forward; and, when the `speculate` command exists, the
# speculative speedup on the synth target/draft pair on the GPU. Designed to finish in under 8
# minutes on one H100/H200 (build ~2-4 min on 16 cores, tests < 1 min, benchmark ~1-2 min).
# Exit status: 0 when every test ran and passed; 1 on a build or test failure, or when GPU tests
# were skipped although a GPU is visible (set SPECMOE_ALLOW_SKIP=1 to accept skips, e.g. on a
# machine without a GPU). Benchmark failures are reported but do not change the status.
#
#   scripts/gpu-check.sh                 # logs and JUnit XML in build-gpu/gpu-check/
#   GPU_CHECK_OUT=$OUT scripts/gpu-check.sh   # ... or in $GPU_CHECK_OUT
#   GPU_CHECK_BENCH=0 scripts/gpu-check.sh    # tests only
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${GPU_CHECK_BUILD:-build-gpu}
LOGS=${GPU_CHECK_OUT:-$BUILD/gpu-check}
ARCH=${CUDA_ARCH:-90}
TESTS=(test_backend_ops test_cuda_ops test_cuda_model test_cuda_moe test_cuda_speculative)
BENCH=${GPU_CHECK_BENCH:-1}
JOBS=$(nproc)
mkdir -p "$LOGS"
start=$(date +%s)

echo "== device"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee "$LOGS/device.txt"
  gpu_visible=1
else
  echo "nvidia-smi not found" | tee "$LOGS/device.txt"
  gpu_visible=0
fi

echo "== configure + build (sm_$ARCH, $JOBS jobs)"
if ! cmake -S . -B "$BUILD" -DSPECMOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_BUILD_TYPE=Release \
    > "$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  echo "RESULT: configure FAILED"
  exit 1
fi
if ! cmake --build "$BUILD" -j"$JOBS" --target "${TESTS[@]}" bench_cuda_forward specmoe > "$LOGS/build.log" 2>&1; then
  grep -E "error|Error" "$LOGS/build.log" | head -40
  echo "RESULT: build FAILED (see $LOGS/build.log)"
  exit 1
fi
echo "built in $(( $(date +%s) - start )) s"

echo "== tests"
status=0
summary=""
for t in "${TESTS[@]}"; do
  t0=$(date +%s)
  # The op harness also times every entry on both backends (SPECMOE_OPS_PERF), which keeps its
  # performance test from counting as a skip.
  perf=0
  [ "$t" = test_backend_ops ] && perf=1
  SPECMOE_OPS_PERF=$perf timeout 300 "./$BUILD/tests/$t" --gtest_output="xml:$LOGS/$t.xml" > "$LOGS/$t.log" 2>&1
  rc=$?
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$LOGS/$t.log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$LOGS/$t.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$LOGS/$t.log" | tail -1)
  line="$t: rc=$rc passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0} ($(( $(date +%s) - t0 )) s)"
  summary+="$line"$'\n'
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E "^\[  FAILED  \]|Failure|error" "$LOGS/$t.log" | head -40
  fi
  if [ "${skipped:-0}" -gt 0 ] && [ "$gpu_visible" -eq 1 ] && [ "${SPECMOE_ALLOW_SKIP:-0}" != 1 ]; then
    echo "$t: ${skipped} test(s) skipped although a GPU is visible:"
    grep -A1 "Skipped" "$LOGS/$t.log" | head -6
    status=1
  fi
done

if [ "$BENCH" = 1 ]; then
  echo "== benchmark: synth target-1b (F16, ~1.1B params) on cuda:0"
  t0=$(date +%s)
  # The model is written once into $TMPDIR/specmoe-bench (~2.2 GB, ~30 s).
  if timeout 240 "./$BUILD/tests/bench_cuda_forward" --benchmark_out="$LOGS/bench_cuda_forward.json" \
      --benchmark_out_format=json > "$LOGS/bench_cuda_forward.log" 2>&1; then
    grep -E "^BM_|^gpu|^cuda" "$LOGS/bench_cuda_forward.log"
    summary+="bench_cuda_forward: ok ($(( $(date +%s) - t0 )) s)"$'\n'
    summary+="$(grep -E "^BM_CudaDecode|^BM_CudaVerifyCost" "$LOGS/bench_cuda_forward.log")"$'\n'
  else
    tail -20 "$LOGS/bench_cuda_forward.log"
    summary+="bench_cuda_forward: FAILED (see $LOGS/bench_cuda_forward.log)"$'\n'
  fi

  echo "== speculative speedup on the synth pair (target/draft) on cuda:0"
  if "./$BUILD/specmoe" speculate --help > /dev/null 2>&1; then
    SYN=${TMPDIR:-/tmp}/specmoe-bench
    mkdir -p "$SYN"
    [ -f "$SYN/synth-target-seed1.gguf" ] || "./$BUILD/specmoe" synth --preset target -o "$SYN/synth-target-seed1.gguf" -s 1
    [ -f "$SYN/synth-draft-seed1.gguf" ] || "./$BUILD/specmoe" synth --preset draft -o "$SYN/synth-draft-seed1.gguf" -s 1
    # The speculative verifier at temperature 0 and 0.8: device-resident sampling and
    # verification (only drafted ids and the verdict cross the bus).
    for temp in 0 0.8; do
      if timeout 120 "./$BUILD/specmoe" speculate -m "$SYN/synth-target-seed1.gguf" -md "$SYN/synth-draft-seed1.gguf" \
          -p "The quick brown fox" -n 256 --temp "$temp" --draft-max 4 --compare --repeat 3 --device cuda \
          > "$LOGS/speculate-t$temp.log" 2>&1; then
        tail -15 "$LOGS/speculate-t$temp.log"
        summary+="speculate --compare --temp $temp --device cuda: ok (see $LOGS/speculate-t$temp.log)"$'\n'
        summary+="$(grep -iE "speedup" "$LOGS/speculate-t$temp.log" | head -4)"$'\n'
      else
        tail -15 "$LOGS/speculate-t$temp.log"
        summary+="speculate --compare --temp $temp --device cuda: FAILED (see $LOGS/speculate-t$temp.log)"$'\n'
      fi
    done
  else
    echo "no 'specmoe speculate' command in this build: skipped"
    summary+="speculate: skipped (command not in this build)"$'\n'
  fi
fi

echo "== summary"
printf "%s" "$summary" | tee "$LOGS/summary.txt"
echo "total $(( $(date +%s) - start )) s"
if [ "$status" -eq 0 ]; then echo "RESULT: OK"; else echo "RESULT: FAILED"; fi
exit "$status"
