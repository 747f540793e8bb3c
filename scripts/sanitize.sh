#!/usr/bin/env bash
# Builds the whole suite with AddressSanitizer + UndefinedBehaviorSanitizer (gcc, the default
# compiler) into build-asan/ and runs ctest there. Any sanitizer report aborts the test that hit it
# (-fno-sanitize-recover=all), so a pass means no report.
#   scripts/sanitize.sh                 all tests
#   CTEST_ARGS="-R gguf" scripts/sanitize.sh     a subset (any ctest arguments)
#   SANITIZE_TARGETS="test_gguf test_quant" scripts/sanitize.sh   build and run only these
# Environment: BUILD_DIR (default build-asan), JOBS (build and test parallelism, default 2),
#   SANITIZERS (default address,undefined), CC/CXX to pick another compiler, SPECMOE_FUZZ
#   (default OFF; ON with CC=clang CXX=clang++ makes the folder scripts/fuzz.sh's too, so the
#   libraries compile once for both: scripts/test.sh does that).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-2}
SANITIZERS=${SANITIZERS:-address,undefined}

# Ninja for a new build folder: CMake's Makefiles build the targets named on one command line one
# after another (.NOTPARALLEL), and each test executable is one source file, so with make the
# test build ran on one core whatever JOBS said. A folder configured before keeps its generator.
generator=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECMOE_CUDA=OFF \
  -DSPECMOE_SANITIZE="$SANITIZERS" -DSPECMOE_FUZZ="${SPECMOE_FUZZ:-OFF}"
# Tests only: benchmarks are not run by ctest, so building them would only cost time.
# SANITIZE_TARGETS (space-separated test executables) limits the build to a subset.
if [ -n "${SANITIZE_TARGETS:-}" ]; then
  targets=$SANITIZE_TARGETS
else
  # Make lists targets as "... name", Ninja as "name: rule".
  targets=$(cmake --build "$BUILD_DIR" --target help |
    sed -n -e 's/^\.\.\. \(test_[A-Za-z0-9_]*\).*/\1/p' -e 's/^\(test_[A-Za-z0-9_]*\): .*/\1/p' \
      -e 's/^\.\.\. \(specmoe\)$/\1/p' -e 's/^\(specmoe\): .*/\1/p' | sort -u | tr '\n' ' ')
fi
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j"$JOBS" --target $targets

# detect_leaks: leaks fail the run too. halt_on_error: first report ends the test with its stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# shellcheck disable=SC2086
if [ -n "${SANITIZE_TARGETS:-}" ] && [ -z "${CTEST_ARGS:-}" ]; then
  # Only the executables that were built: ctest -R on their test names would be fragile, so run
  # them directly (each is a GoogleTest binary that exits non-zero on any failure).
  for t in $SANITIZE_TARGETS; do
    echo "== $t (address,undefined)"
    "$BUILD_DIR/tests/$t" --gtest_brief=1
  done
else
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" --timeout 600 ${CTEST_ARGS:-}
fi
