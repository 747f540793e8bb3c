#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. installs the Debian packages specmoe builds with (when missing);
#   2. builds Release into build/ — with the CUDA backend when nvcc exists, so CUDA code is
#      compiled even where no GPU can run it (GPU tests then skip) — and runs ctest;
#   3. runs the live Slurm test (scripts/slurm-test.sh: a one-node Slurm on localhost runs a sweep
#      through `specmoe slurm`, including a cancelled task and its recovery; 35-55 s on 2 cores,
#      installing slurm-wlm and munge when missing). SPECMOE_SKIP_SLURM=1 skips it;
#   4. installs clang (scripts/install-deps.sh --fuzz) and builds the parser and sampling tests
#      with AddressSanitizer + UndefinedBehaviorSanitizer into build-fuzz/, then runs them
#      (scripts/sanitize.sh). SPECMOE_SKIP_SANITIZE=1 skips this pass;
#   5. a fuzz smoke: builds the libFuzzer targets in the same build-fuzz/ (its libraries are
#      those of step 4, compiled once) and runs each for SPECMOE_FUZZ_SECONDS (default 30) on its
#      seeds and regression inputs, two at a time (scripts/fuzz.sh); any crash, leak, timeout, OOM
#      or oracle failure fails CI and is left in build-fuzz/findings/. SPECMOE_SKIP_FUZZ=1 skips it.
#   Steps 4 and 5 share one clang folder: a separate gcc sanitizer folder took 22 of CI's 57
#   minutes on 2 cores; with the shared one, CI (2026-12-03, 2 cores, a clean clone) spent 6
#   minutes on step 4 (build and tests) and 4 on step 5, of 19.5 in all (steps 1-2 about 9,
#   ctest's 988 tests 1.7 of them; step 3 0.5).
# Environment: SPECMOE_CUDA (AUTO/ON/OFF, default AUTO), SPECMOE_CUDA_ARCHS (default 90 here,
# one architecture to keep CI's compile time down), JOBS (default: nproc),
# SPECMOE_FAIL_ON_MISSING (default 1): CI has ../shared/data beside the clone and builds the CLI,
# so a test that would skip for want of either fails instead (tests/test_data.h); real-model
# ($SPECMOE_MODELS) and GPU tests still skip. SPECMOE_FAIL_ON_MISSING=0 restores the skips.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
export SPECMOE_FAIL_ON_MISSING=${SPECMOE_FAIL_ON_MISSING:-1}
scripts/install-deps.sh

cuda=${SPECMOE_CUDA:-AUTO}
cuda_args=(-DSPECMOE_CUDA="$cuda")
if [ "$cuda" != OFF ] && { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  cuda_args+=(-DCMAKE_CUDA_ARCHITECTURES="${SPECMOE_CUDA_ARCHS:-90}")
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}"
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS" 2>&1 | tee build/ctest.log

if [ "${SPECMOE_SKIP_SLURM:-0}" != 1 ]; then
  slurm_start=$(date +%s)
  SPECMOE="$PWD/build/specmoe" scripts/slurm-test.sh
  echo "scripts/slurm-test.sh took $(($(date +%s) - slurm_start)) s"
fi

# The sanitizer pass in CI covers the input parsers and the sampling chain, where untrusted bytes
# enter (GGUF reader, quantized blocks, tokenizers, ModelConfig, experiment TOML and prompts,
# sampling and RNG), to keep CI's time down; `scripts/sanitize.sh` alone runs the whole suite.
if [ "${SPECMOE_SKIP_SANITIZE:-0}" != 1 ] || [ "${SPECMOE_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/install-deps.sh --fuzz
fi
if [ "${SPECMOE_SKIP_SANITIZE:-0}" != 1 ]; then
  sanitize_start=$(date +%s)
  CC=clang CXX=clang++ SPECMOE_FUZZ=ON BUILD_DIR=build-fuzz JOBS=$JOBS SANITIZE_TARGETS="${SANITIZE_TARGETS:-test_gguf test_quant test_dtype test_tokenizer test_model_config test_sampling test_rng test_experiment_spec test_experiment_prompts test_chat_template test_json_output test_run_recovery test_quantize}" \
    scripts/sanitize.sh
  echo "scripts/sanitize.sh took $(($(date +%s) - sanitize_start)) s"
fi
if [ "${SPECMOE_SKIP_FUZZ:-0}" != 1 ]; then
  fuzz_start=$(date +%s)
  JOBS=2 BUILD_JOBS=$JOBS BUILD_DIR=build-fuzz scripts/fuzz.sh "${SPECMOE_FUZZ_SECONDS:-30}"
  echo "scripts/fuzz.sh took $(($(date +%s) - fuzz_start)) s"
fi
# The closing summary of the main suite, repeated last so CI logs end on it.
tail -n 3 build/ctest.log
