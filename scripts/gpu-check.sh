#!/usr/bin/env bash
# GPU check: one command for the lent, offline GPU machine (one H200, 16 cores, no network; its own
# image with nvcc, CMake, ninja and python3, but none of the Debian -dev packages specmoe builds
# with). It
#   1. prints what it finds there (OS, glibc, libstdc++, compilers, CMake, ninja, CUDA, driver,
#      nvidia-smi) and whether the carried shared library's symbol versions are available;
#   2. unpacks the bundle that scripts/gpu-bundle.sh made here (.gpu-bundle/: Debian .debs and the
#      shared test data) into a private prefix (build-gpu/deps, nothing is installed into /);
#   3. configures (sm_90, header-only fmt/toml++, static GoogleTest/PCRE2/zlib) and builds, with ninja
#      when present, the CLI, every GPU test binary (test_cuda_*, and any op-harness binary:
#      test_*backend_ops*, test_*op_harness*; GPU_CHECK_TESTS overrides the pattern) and every
#      bench_cuda_* binary;
#   4. runs the GPU tests (the stories260K ones read the carried data through SPECMOE_DATA_DIR);
#      a skip counts as a failure only when it says a GPU, the CUDA build or the data is missing
#      although a GPU is visible (GPU_CHECK_BAD_SKIP); other skips, such as
#      CliRefusesAMissingDeviceWithOneLine's whenever a device is present, are listed as expected;
#   5. measures what exists (GPU_CHECK_BENCH=0 skips it): decode tokens/s and achieved weight-read
#      bandwidth of synth target-1b (~1.1B, F16; other types when `specmoe synth` offers them),
#      the verify cost r(T) for the batch sizes the benchmark has, prefill tokens/s, speculative
#      speedup at temperature 0 and 0.8 on the synth target/draft pair, CPU-vs-GPU greedy tokens;
#   6. writes at most 7 files into $OUT (else build-gpu/gpu-check/): env.txt, build.log,
#      tests.log, bench.log, bench_cuda.json (Google Benchmark's own), gpu-check.json (the figures,
#      device, driver, CUDA version, commit; what was not measured is listed as such) and
#      summary.txt, and prints the summary last.
# Stages stop being started past GPU_CHECK_DEADLINE_S (default 500 s) so that the summary is
# always printed inside the device's 10-minute command limit; on 16 cores the whole run should
# take about 6 minutes (configure + build about 2-3, tests about 1, measurements about 2).
# Exit status: 0 all selected GPU tests passed on a visible GPU; 1 configure, build or test
# failure, or an unexpected skip; 3 built, but no GPU was visible (nothing ran on a GPU).
# Measurement failures are reported and do not change the status.
#
# Prepare here (Debian 12, network):  scripts/gpu-bundle.sh
# Then the device tool's call, from the repository root (command string + carry):
#   run(command="bash scripts/gpu-check.sh", carry=[".gpu-bundle"], timeout_s=580)
# A rerun while the machine is still warm reuses build-gpu/ (ignored build outputs are kept
# there), so it rebuilds only what changed. Offline dry run here: scripts/gpu-bundle-dryrun.sh.
#
# Environment: OUT or GPU_CHECK_OUT (logs), GPU_BUNDLE (default .gpu-bundle), GPU_CHECK_BUILD
# (default build-gpu), CUDA_ARCH (default 90), JOBS (default nproc), GPU_CHECK_BENCH (1),
# GPU_CHECK_TESTS (ERE on target names), GPU_CHECK_BAD_SKIP (ERE on skip messages),
# GPU_CHECK_DEADLINE_S (500: no measurement starts later), GPU_CHECK_TEST_TIMEOUT_S (240 per test
# binary), GPU_CHECK_HARD_S (560: test binaries are stopped by then).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
start=$(date +%s)
LOGS=${OUT:-${GPU_CHECK_OUT:-build-gpu/gpu-check}}
BUNDLE=${GPU_BUNDLE:-.gpu-bundle}
BUILD=${GPU_CHECK_BUILD:-build-gpu}
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
BENCH=${GPU_CHECK_BENCH:-1}
DEADLINE=${GPU_CHECK_DEADLINE_S:-500}
TEST_TIMEOUT=${GPU_CHECK_TEST_TIMEOUT_S:-240}
TEST_RE=${GPU_CHECK_TESTS:-'^(test_cuda_[A-Za-z0-9_]+|test_[A-Za-z0-9_]*backend_ops[A-Za-z0-9_]*|test_[A-Za-z0-9_]*op_harness[A-Za-z0-9_]*|test_[A-Za-z0-9_]*ops_harness[A-Za-z0-9_]*)$'}
BAD_SKIP=${GPU_CHECK_BAD_SKIP:-'no CUDA device|no device|built without the CUDA backend|shared test data not found|not built$|not built |cudaError'}
HARD=${GPU_CHECK_HARD_S:-560}     # test binaries are stopped by then, whatever their own timeout
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
WORK=$BUILD/gpu-check-work        # scratch: per-binary XML, CLI JSON (not returned)
rm -rf "$WORK"; mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
ENV_TXT=$LOGS/env.txt BUILD_LOG=$LOGS/build.log TESTS_LOG=$LOGS/tests.log BENCH_LOG=$LOGS/bench.log
: > "$BUILD_LOG"; : > "$TESTS_LOG"; : > "$BENCH_LOG"

elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( DEADLINE - $(elapsed) )); }
# budget CAP: seconds a stage may run: CAP, or what is left before the deadline (at least 10).
budget() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 10 ] && l=10; echo "$l"; }
# test_budget: the per-binary timeout, or what is left before the hard limit (at least 20).
test_budget() { local l=$(( HARD - $(elapsed) )); [ "$l" -gt "$TEST_TIMEOUT" ] && l=$TEST_TIMEOUT; [ "$l" -lt 20 ] && l=20; echo "$l"; }
stage() { echo "== $* ($(elapsed) s)"; }
note() { echo "$*" >> "$WORK/notes.txt"; }

# ---------------------------------------------------------------------------------------- 1. env
stage "what this machine has"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "uname: $(uname -srmo 2>/dev/null)"
  [ -r /etc/os-release ] && echo "os: $(. /etc/os-release && echo "${PRETTY_NAME:-$NAME}")"
  echo "cores: $(nproc)  memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo 2>/dev/null)  disk free: $(df -h . 2>/dev/null | awk 'NR==2 {print $4}')"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -1)"
  for c in c++ g++ gcc clang++ nvcc cmake ninja make pkg-config dpkg-deb ar tar python3 git; do
    p=$(command -v "$c" 2>/dev/null) || { echo "$c: not found"; continue; }
    case $c in
      ar|tar|dpkg-deb) v=$("$c" --version 2>/dev/null | head -1) ;;
      nvcc) v=$("$c" --version 2>/dev/null | grep -i release) ;;
      *) v=$("$c" --version 2>&1 | head -1) ;;
    esac
    echo "$c: $p: $v"
  done
  [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc > /dev/null && echo "nvcc: /usr/local/cuda/bin/nvcc (not on PATH): $(/usr/local/cuda/bin/nvcc --version | grep -i release)"
  ls -d /usr/local/cuda* 2>/dev/null | tr '\n' ' ' | sed 's/^/cuda roots: /'; echo
  libstdcxx=$( (c++ -print-file-name=libstdc++.so.6 || g++ -print-file-name=libstdc++.so.6) 2>/dev/null | head -1)
  [ -f "$libstdcxx" ] || libstdcxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
  if [ -f "$libstdcxx" ]; then
    echo "libstdc++: $(readlink -f "$libstdcxx"): newest $(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "$libstdcxx" | sort -uV | tail -1)"
  else
    echo "libstdc++: not found"
  fi
  if command -v nvidia-smi > /dev/null; then
    echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -4)"
    nvidia-smi 2>&1 | head -20
  else
    echo "nvidia-smi: not found"
  fi
  [ -f "$BUNDLE/MANIFEST" ] && { echo "bundle manifest:"; sed 's/^/  /' "$BUNDLE/MANIFEST"; }
} > "$ENV_TXT" 2>&1
cat "$ENV_TXT"

gpu_visible=0
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then gpu_visible=1; fi

# The carried shared library (libbenchmark) and the static GoogleTest archives must find the
# glibc and libstdc++ symbol versions they were built against: a miss stops the benchmarks from
# loading, or the tests from linking. Said before the build, which would take minutes to tell.
if [ -f "$BUNDLE/MANIFEST" ]; then
  for kind in shared static; do
    what=libbenchmark.so; [ $kind = static ] && what="libgtest.a (the tests will not link)"
    for need in $(sed -n "s/^${kind}_lib_needs //p" "$BUNDLE/MANIFEST"); do
      case $need in
        GLIBC_*) have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
                 [ -n "$have" ] && [ "$(printf '%s\n%s\n' "${need#GLIBC_}" "$have" | sort -V | head -1)" = "${need#GLIBC_}" ] ||
                   echo "WARNING: carried $what needs $need, this glibc is ${have:-unknown}" | tee -a "$ENV_TXT" ;;
        GLIBCXX_*) [ -f "${libstdcxx:-}" ] && grep -aq "^$need\$" <(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "$libstdcxx" | sort -u) ||
                   echo "WARNING: carried $what needs $need, not in ${libstdcxx:-libstdc++}" | tee -a "$ENV_TXT" ;;
      esac
    done
  done
fi

# ------------------------------------------------------------------------------------ 2. unpack
stage "unpack $BUNDLE"
DEPS=$ROOT/$BUILD/deps
if [ ! -d "$BUNDLE/debs" ]; then
  echo "no $BUNDLE/debs: run scripts/gpu-bundle.sh on the development machine and carry $BUNDLE"
  echo "RESULT: FAILED (no bundle)"
  exit 1
fi
# A warm rerun with the same bundle keeps the unpacked prefix (and so the build's timestamps).
if ! cmp -s "$BUNDLE/MANIFEST" "$DEPS/.manifest"; then
  rm -rf "$DEPS"; mkdir -p "$DEPS"
  for deb in "$BUNDLE"/debs/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$deb" "$DEPS" || { echo "RESULT: FAILED (dpkg-deb -x $deb)"; exit 1; }
    else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
      member=$(ar t "$deb" | grep '^data\.tar')
      case $member in *.xz) z=-J ;; *.zst) z=--zstd ;; *.gz) z=-z ;; *) z= ;; esac
      ar p "$deb" "$member" | tar -x $z -C "$DEPS" -f - || { echo "RESULT: FAILED (unpacking $deb)"; exit 1; }
    fi
  done
  cp "$BUNDLE/MANIFEST" "$DEPS/.manifest" 2> /dev/null
fi
LIBDIR=$(dirname "$(find "$DEPS" -name libgtest.a | head -1)")
echo "prefix $DEPS/usr, libraries in ${LIBDIR#$ROOT/}"
# The data and the CLI are carried and built here, so a test that finds either missing fails
# (tests/test_data.h) instead of skipping.
export SPECMOE_FAIL_ON_MISSING=1
if [ -d "$BUNDLE/data" ]; then
  export SPECMOE_DATA_DIR=$ROOT/$BUNDLE/data
  echo "SPECMOE_DATA_DIR=$SPECMOE_DATA_DIR ($(find "$SPECMOE_DATA_DIR" -type f | wc -l) files)"
else
  echo "no $BUNDLE/data: the stories260K tests will skip"
fi

# --------------------------------------------------------------------------- 3. configure + build
stage "configure (sm_$ARCH)"
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
if [ -f "$BUILD/CMakeCache.txt" ]; then  # a warm rerun keeps the generator it was made with
  gen=()
fi
nvcc_path=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
cmake_args=(-S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
  -DSPECMOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_CUDA_COMPILER="$nvcc_path"
  -DSPECMOE_HEADER_ONLY_DEPS=ON -DCMAKE_PREFIX_PATH="$DEPS/usr"
  -DGTest_DIR="$LIBDIR/cmake/GTest" -Dbenchmark_DIR="$LIBDIR/cmake/benchmark"
  -DCLI11_DIR="$DEPS/usr/share/cmake/CLI11" -Dnlohmann_json_DIR="$DEPS/usr/share/cmake/nlohmann_json"
  -DPCRE2_INCLUDE_DIR="$DEPS/usr/include" -DPCRE2_LIBRARY="$LIBDIR/libpcre2-8.a"
  -DZLIB_INCLUDE_DIR="$DEPS/usr/include" -DZLIB_LIBRARY="$LIBDIR/libz.a"
  -DRANDOM123_INCLUDE_DIR="$DEPS/usr/include" -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
t0=$(date +%s)
echo "cmake ${cmake_args[*]}" >> "$BUILD_LOG"
if ! cmake "${cmake_args[@]}" >> "$BUILD_LOG" 2>&1; then
  tail -40 "$BUILD_LOG"
  echo "RESULT: FAILED (configure; see build.log)"
  exit 1
fi
configure_s=$(( $(date +%s) - t0 ))
grep -E "specmoe:|CUDA compiler identification|CXX compiler identification" "$BUILD_LOG" | sed 's/^-- //'

# Targets: the CLI, the GPU test binaries and the CUDA benchmarks that this checkout defines.
# (make's help lists "... NAME", ninja's "NAME: phony" besides its internal rules.)
targets_all=$(cmake --build "$BUILD" --target help 2>/dev/null |
              sed -nE 's/^(\.\.\. )?((test|bench)_[A-Za-z0-9_]+)(: phony)?$/\2/p' | sort -u)
tests=$(echo "$targets_all" | grep -E "$TEST_RE" || true)
benches=$(echo "$targets_all" | grep -E '^bench_cuda_[A-Za-z0-9_]+$' || true)
echo "GPU test binaries: $(echo $tests)"
echo "CUDA benchmarks: $(echo $benches)"
stage "build ($JOBS jobs, $(grep -q Ninja "$BUILD/CMakeCache.txt" && echo ninja || echo make))"
t0=$(date +%s)
# shellcheck disable=SC2086
if ! cmake --build "$BUILD" -j"$JOBS" --target specmoe $tests $benches >> "$BUILD_LOG" 2>&1; then
  grep -E "error|Error|FAILED" "$BUILD_LOG" | head -40
  echo "RESULT: FAILED (build; see build.log)"
  exit 1
fi
build_s=$(( $(date +%s) - t0 ))
echo "configured in $configure_s s, built in $build_s s"
echo "configure_s $configure_s build_s $build_s jobs $JOBS" >> "$WORK/notes.txt"
CLI=$ROOT/$BUILD/specmoe

# -------------------------------------------------------------------------------------- 4. tests
stage "GPU tests"
for t in $tests; do
  bin=$BUILD/tests/$t
  [ -x "$bin" ] || { echo "$t: not built"; note "missing_binary $t"; continue; }
  t0=$(date +%s)
  # The op harness also times every entry on both backends (SPECMOE_OPS_PERF=1: its CUDA rows
  # go into gpu-check.json), which also keeps its performance test from counting as a skip.
  perf=0
  [[ $t =~ backend_ops|op_harness|ops_harness ]] && perf=1
  SPECMOE_OPS_PERF=$perf timeout "$(test_budget)" "$bin" --gtest_output="xml:$WORK/$t.xml" > "$WORK/$t.log" 2>&1
  rc=$?
  { echo "===== $t (exit $rc)"; cat "$WORK/$t.log"; } >> "$TESTS_LOG"
  echo "$t rc $rc seconds $(( $(date +%s) - t0 ))" >> "$WORK/test_rcs.txt"
  echo "$t: exit $rc ($(( $(date +%s) - t0 )) s)"
done

# ------------------------------------------------------------------------------- 5. measurements
run_json() {  # run_json NAME CAP CMD...: CLI JSON on stdout into $WORK/NAME.json, stderr into bench.log
  local name=$1 cap=$2; shift 2
  [ "$(left)" -gt 15 ] || { note "deadline $name"; return 1; }
  echo "===== $name: $*" >> "$BENCH_LOG"
  timeout "$(budget "$cap")" "$@" > "$WORK/$name.json" 2>> "$BENCH_LOG"
  local rc=$?
  [ $rc -eq 0 ] || { echo "$name: exit $rc" >> "$BENCH_LOG"; note "failed $name exit $rc"; }
  return $rc
}
if [ "$BENCH" != 1 ]; then
  note "bench off"
elif [ "$gpu_visible" != 1 ]; then
  note "bench no_gpu"
  echo "no GPU visible: measurements not run"
else
  SYN=${TMPDIR:-/tmp}/specmoe-bench
  mkdir -p "$SYN"
  stage "CUDA benchmarks (writes synth target-1b, ~2.2 GB, once into $SYN)"
  for b in $benches; do
    [ -x "$BUILD/tests/$b" ] || continue
    [ "$(left)" -gt 30 ] || { note "deadline $b"; continue; }
    echo "===== $b" >> "$BENCH_LOG"
    timeout "$(budget 200)" "$BUILD/tests/$b" --benchmark_out="$WORK/$b.bench.json" --benchmark_out_format=json \
      >> "$BENCH_LOG" 2>&1 || { echo "$b: exit $?" | tee -a "$BENCH_LOG"; note "failed $b"; }
  done
  grep -E "^BM_" "$BENCH_LOG" | cut -c1-150

  # Other tensor types of the ~1B target, where the synth command offers them: presets named
  # target-1b-<type>, decode only.
  for p in $("$CLI" synth --help 2>/dev/null | grep -oE '^ *target-1b-[A-Za-z0-9_]+' | tr -d ' '); do
    for b in $benches; do
      [ "$(left)" -gt 60 ] || { note "deadline $p"; break; }
      echo "===== $b preset $p" >> "$BENCH_LOG"
      SPECMOE_BENCH_PRESET=$p timeout "$(budget 90)" "$BUILD/tests/$b" --benchmark_filter='Decode' \
        --benchmark_out="$WORK/$b.$p.bench.json" --benchmark_out_format=json >> "$BENCH_LOG" 2>&1 || note "failed $b $p"
    done
  done

  stage "prefill and decode through the CLI (target-1b, cuda)"
  T1B=$SYN/synth-target-1b-seed1.gguf   # the benchmark's file; written here if it did not run
  [ -f "$T1B" ] || timeout "$(budget 90)" "$CLI" synth --preset target-1b -o "$T1B" -s 1 >> "$BENCH_LOG" 2>&1
  # A ~500-token prompt of byte-level text for prefill.
  python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog'] * 11))" > "$WORK/prompt.txt" 2>/dev/null ||
    for _ in $(seq 11); do printf 'the quick brown fox jumps over the lazy dog '; done > "$WORK/prompt.txt"
  "$CLI" info -m "$T1B" --json > "$WORK/info-target-1b.json" 2>> "$BENCH_LOG"
  run_json prefill-target-1b 90 "$CLI" generate -m "$T1B" -f "$WORK/prompt.txt" -n 128 --temp 0 --device cuda --json

  stage "speculative speedup, synth target/draft pair (cuda)"
  TGT=$SYN/synth-target-seed1.gguf DRF=$SYN/synth-draft-seed1.gguf
  [ -f "$TGT" ] || "$CLI" synth --preset target -o "$TGT" -s 1 >> "$BENCH_LOG" 2>&1
  [ -f "$DRF" ] || "$CLI" synth --preset draft -o "$DRF" -s 1 >> "$BENCH_LOG" 2>&1
  for temp in 0 0.8; do
    run_json "speculate-t$temp" 90 "$CLI" speculate -m "$TGT" -md "$DRF" -p "The quick brown fox" -n 256 \
      --temp "$temp" -s 1 --draft-max 4 --compare --repeat 3 --device cuda --json
  done

  stage "CPU vs GPU tokens, same seed"
  STORIES=${SPECMOE_DATA_DIR:-$ROOT/../shared/data}/models/stories260K.gguf
  for dev in cpu cuda; do
    run_json "tokens-target-t0-$dev" 60 "$CLI" generate -m "$TGT" -p "The quick brown fox" -n 64 --temp 0 --device "$dev" --json
    run_json "tokens-target-t0.8-$dev" 60 "$CLI" generate -m "$TGT" -p "The quick brown fox" -n 64 --temp 0.8 -s 7 --device "$dev" --json
    [ -f "$STORIES" ] && run_json "tokens-stories-t0-$dev" 30 "$CLI" generate -m "$STORIES" -p "Once upon a time" -n 200 --temp 0 --device "$dev" --json
  done
fi

# ---------------------------------------------------------------------------- 6. JSON + summary
stage "figures"
python3 - "$WORK" "$LOGS" "$ROOT" "$BUNDLE" "$gpu_visible" "$BAD_SKIP" "$(elapsed)" << 'PY' > "$LOGS/summary.txt" 2> "$WORK/figures.err"
import glob, hashlib, json, os, re, subprocess, sys, xml.etree.ElementTree as ET

work, logs, root, bundle, gpu_visible, bad_skip, elapsed = sys.argv[1:8]
gpu_visible = gpu_visible == "1"
bad = re.compile(bad_skip)
env_lines = open(os.path.join(logs, "env.txt"), errors="replace").read().splitlines()
def env(key):
    for l in env_lines:
        if l.startswith(key + ":"):
            return l[len(key) + 1:].strip()
    return None
def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except Exception:
        return None
notes = open(os.path.join(work, "notes.txt")).read().splitlines() if os.path.exists(os.path.join(work, "notes.txt")) else []

# Commit: git where the checkout has its .git, else what the bundle recorded.
commit = None
try:
    commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip() or None
    if commit and subprocess.run(["git", "-C", root, "diff", "--quiet", "HEAD", "--"], timeout=10).returncode != 0:
        commit += "-dirty"
except Exception:
    pass
commit_source = "git"
if not commit:
    commit_source = "bundle MANIFEST (commit the bundle was made at; no .git here)"
    try:
        commit = next(l.split()[1] for l in open(os.path.join(bundle, "MANIFEST")) if l.startswith("commit "))
    except Exception:
        commit = "unknown"

# Does the tree built here equal that commit? (The bundle's TREE is `git ls-files -s` there.)
tree = None
if os.path.exists(os.path.join(bundle, "TREE")):
    differ, n = [], 0
    for l in open(os.path.join(bundle, "TREE")):
        meta, path = l.rstrip("\n").split("\t", 1)
        mode, sha = meta.split()[:2]
        if mode == "160000":
            continue
        n += 1
        full = os.path.join(root, path)
        try:
            data = os.readlink(full).encode() if mode == "120000" else open(full, "rb").read()
            ok = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == sha
        except OSError:
            ok = False
        if not ok:
            differ.append(path)
    tree = {"files": n, "differ_from_commit": len(differ), "first_differing": differ[:10]}

# Device.
device = {"gpu_visible": gpu_visible}
smi = env("nvidia-smi") or ""
parts = [p.strip() for p in smi.split(",")]
if len(parts) >= 4 and gpu_visible:
    device.update(name=parts[0], driver=parts[1], memory=parts[2], compute_cap=parts[3])
m = re.search(r"CUDA Version:\s*([0-9.]+)", "\n".join(env_lines))
device["driver_cuda_version"] = m.group(1) if m else None
nv = env("nvcc") or ""
m = re.search(r"release ([0-9.]+)", nv)
toolchain = {"nvcc": m.group(1) if m else None, "cxx": env("c++"), "cmake": env("cmake"), "ninja": env("ninja"),
             "glibc": env("glibc"), "libstdc++": env("libstdc++"), "os": env("os"), "python3": env("python3")}

# Tests from the per-binary GoogleTest XML.
rcs = {}
if os.path.exists(os.path.join(work, "test_rcs.txt")):
    for l in open(os.path.join(work, "test_rcs.txt")):
        t, _, rc, _, secs = l.split()
        rcs[t] = (int(rc), int(secs))
tests, failed_any, lines = {}, False, []
for t, (rc, secs) in sorted(rcs.items()):
    entry = {"exit": rc, "seconds": secs, "passed": [], "failed": [], "expected_skips": {}, "unexpected_skips": {}}
    xml = os.path.join(work, t + ".xml")
    if os.path.exists(xml):
        for tc in ET.parse(xml).getroot().iter("testcase"):
            name = tc.get("classname") + "." + tc.get("name")
            if tc.find("failure") is not None:
                entry["failed"].append(name)
            elif tc.get("result") == "skipped" or tc.find("skipped") is not None:
                sk = tc.find("skipped")
                msg = (sk.get("message") if sk is not None else "") or ""
                msg = msg.split("\n", 1)[-1].strip()
                (entry["unexpected_skips"] if gpu_visible and bad.search(msg) else entry["expected_skips"])[name] = msg
            elif tc.get("status") == "run":
                entry["passed"].append(name)
    else:
        entry["error"] = "no XML written (crash or timeout; see tests.log)"
    ok = rc == 0 and not entry["failed"] and not entry["unexpected_skips"] and "error" not in entry
    failed_any |= not ok
    entry["ok"] = ok
    tests[t] = entry
missing = [n.split()[1] for n in notes if n.startswith("missing_binary")]
failed_any |= bool(missing)

# Figures.
figures, not_measured = {}, []
bench_rows = []
raw = {}
for f in sorted(glob.glob(os.path.join(work, "*.bench.json"))):
    try:
        j = json.load(open(f))
    except Exception as e:
        notes.append(f"unreadable {os.path.basename(f)}: {e}")
        continue
    raw[os.path.basename(f)] = j
    preset = os.path.basename(f).split(".")[1] if os.path.basename(f).count(".") > 2 else "target-1b"
    for b in j.get("benchmarks", []):
        b["_preset"] = preset
        bench_rows.append(b)
def rows(prefix, preset="target-1b"):
    return [b for b in bench_rows if b["name"].startswith(prefix) and b["_preset"] == preset and not b.get("error_occurred")]
errors = sorted({b.get("error_message") for b in bench_rows if b.get("error_occurred")})
if errors:
    figures["benchmark_errors"] = errors

decode = {}
for b in bench_rows:
    if b["name"].startswith("BM_CudaDecode") and not b.get("error_occurred"):
        decode[b["_preset"]] = {"tokens_per_s": round(b.get("tokens/s", 0), 2), "weight_GB_per_s": round(b.get("weight_GB/s", 0), 1),
                                "ms_per_token": round(b["real_time"], 4), "weight_MB": round(b.get("weight_MB", 0), 1)}
if decode:
    figures["decode_synth_target_1b"] = decode
def norm(x): return re.sub(r"[^a-z0-9]", "", x.lower())
for t in ("F16", "Q8_0", "Q4_K_M"):
    have = (t == "F16" and "target-1b" in decode) or any(norm(t) in norm(p[len("target-1b"):]) for p in decode)
    if not have:
        not_measured.append(f"decode tokens/s and HBM GB/s, synth ~1B target, {t}" +
                            ("" if t == "F16" else " (no synth preset or type for it in this build)"))

fwd = {}
for b in rows("BM_CudaForward"):
    m = re.search(r"tokens:(\d+)", b["name"])
    if m:
        fwd[int(m.group(1))] = b["real_time"]
if 1 in fwd:
    r = {str(T): round(fwd[T] / fwd[1], 3) for T in sorted(fwd) if T <= 16}
    figures["verify_cost_r_T"] = {"r": r, "ms_per_forward": {str(T): round(v, 4) for T, v in sorted(fwd.items())},
                                   "definition": "time of a T-token forward (logits for all T) / a 1-token forward, same run"}
    missing_T = [T for T in range(1, 17) if T not in fwd]
    if missing_T:
        not_measured.append(f"r(T) for T = {missing_T} (the benchmark has T = {sorted(fwd)})")
    if 64 in fwd:
        figures["forward_64_tokens_per_s"] = round(64 / (fwd[64] / 1e3), 1)
else:
    not_measured.append("verify cost r(T), T = 1..16")
vc = rows("BM_CudaVerifyCost")
if vc:
    figures["verify_cost_9_over_1_alternated"] = round(vc[0].get("verify_cost_9_over_1", 0), 3)

pre = load("prefill-target-1b.json")
if pre and "timings" in pre:
    tm = pre["timings"]
    figures["prefill_synth_target_1b"] = {"prompt_tokens": tm.get("n_prompt"), "prefill_tokens_per_s": round(tm.get("prompt_tokens_per_second", 0), 1),
                                          "decode_tokens_per_s_cli": round(tm.get("generation_tokens_per_second", 0), 2), "n_generated": tm.get("n_generated"),
                                          "note": "one CLI run: the prefill is the process's first forward on the device (includes cuBLAS's first-call setup); forward_64_tokens_per_s is the benchmark's steady state"}
    info = load("info-target-1b.json")
    if info and tm.get("generation_tokens_per_second"):
        figures["prefill_synth_target_1b"]["decode_file_bytes_GB_per_s_cli"] = round(info["tensor_bytes"] * tm["generation_tokens_per_second"] / 1e9, 1)
else:
    not_measured.append("prefill tokens/s (CLI generate on target-1b)")

spec = {}
for temp in ("0", "0.8"):
    s = load(f"speculate-t{temp}.json")
    if s and "metrics" in s:
        mm = s["metrics"]
        spec[temp] = {"speedup_wall": s.get("speedup"), "speedup_decode": s.get("decode_speedup"),
                      "acceptance_rate": mm.get("acceptance_rate"), "mean_accepted_length": mm.get("mean_accepted_length"),
                      "cost_ratio": mm.get("cost_ratio"), "predicted_speedup": mm.get("predicted_speedup"),
                      "decode_tokens_per_s": mm.get("decode_tokens_per_second"), "identical_to_baseline": s.get("identical_to_baseline"),
                      "draft_max": 4, "repeat": s.get("repeat")}
    else:
        not_measured.append(f"speculative speedup at temperature {temp} (synth target/draft, cuda)")
if spec:
    figures["speculative_synth_pair"] = spec

eq = {}
for name in ("target-t0", "target-t0.8", "stories-t0"):
    c, g = load(f"tokens-{name}-cpu.json"), load(f"tokens-{name}-cuda.json")
    if c and g and "tokens" in c and "tokens" in g:
        a, b = c["tokens"], g["tokens"]
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))
        eq[name] = {"equal": a == b, "n": len(a), "first_difference": first}
    else:
        not_measured.append(f"CPU-vs-GPU tokens {name}")
if eq:
    eq["note"] = ("t0: greedy, expected equal (near-ties in random synth weights can differ); "
                  "t0.8: same seed, the device draws in its own layout, equality not expected")
    figures["cpu_vs_gpu_tokens"] = eq

def group(pattern):
    out = {}
    for t, e in tests.items():
        for n in e["passed"]:
            if re.search(pattern, n, re.I): out[n] = "passed"
        for n in e["failed"]:
            if re.search(pattern, n, re.I): out[n] = "FAILED"
        for n in list(e["unexpected_skips"]) + list(e["expected_skips"]):
            if re.search(pattern, n, re.I): out[n] = "skipped"
    return out
loss = group(r"lossless|chi|distribution|residual|always.?accept")
if loss: figures["gpu_losslessness_tests"] = loss
else: not_measured.append("GPU losslessness tests")
harness = {t: e for t, e in tests.items() if re.search(r"backend_ops|op_harness|ops_harness", t)}
if harness:
    oh = {}
    for t, e in harness.items():
        h = {"passed": len(e["passed"]), "failed": e["failed"], "cuda_tests": {}, "accuracy": [], "cuda_perf": []}
        for n in e["passed"] + e["failed"] + list(e["expected_skips"]) + list(e["unexpected_skips"]):
            if "cuda" in n.lower():
                h["cuda_tests"][n] = ("FAILED" if n in e["failed"] else "passed" if n in e["passed"] else "skipped")
        try:
            log = open(os.path.join(work, t + ".log"), errors="replace").read().splitlines()
        except OSError:
            log = []
        for l in log:
            if l.startswith("[ops] ") and "cuda" in l.lower():
                h["accuracy"].append(l[6:])  # "<op>/cuda: N entries on <backend>; worst nMSE ..."
            m = re.match(r"^cuda\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)\s+(.+)$", l)
            if m:  # the performance table's CUDA rows: ms, GB/s, GFLOP/s, runs, entry
                h["cuda_perf"].append({"entry": m.group(5), "ms": float(m.group(1)), "GB_per_s": float(m.group(2)),
                                       "GFLOP_per_s": float(m.group(3)), "runs": int(m.group(4))})
        if not h["cuda_perf"]:
            not_measured.append(f"{t}: CUDA rows of the performance table (none in its log)")
        oh[t] = h
    figures["op_harness"] = oh
else:
    not_measured.append("op harness CUDA rows (no op-harness binary in this build)")
cpu_gpu = group(r"cpu|match|equal|same")
if cpu_gpu: figures["cpu_vs_gpu_tests"] = cpu_gpu

build = {}
for n in notes:
    if n.startswith("configure_s"):
        k = n.split(); build = {k[0]: int(k[1]), k[2]: int(k[3]), k[4]: int(k[5])}
result = "OK" if gpu_visible and not failed_any else ("FAILED" if failed_any else "NO GPU (built; GPU tests skipped, nothing measured)")
out = {"schema": "specmoe-gpu-check/1", "result": result, "commit": commit, "commit_source": commit_source,
       "tree_vs_commit": tree, "cuda_version": toolchain["nvcc"],
       "date": env("date"), "device": device, "toolchain": toolchain, "build": build, "seconds_total": int(elapsed),
       "tests": tests, "missing_test_binaries": missing, "figures": figures, "not_measured": not_measured,
       "notes": [n for n in notes if not n.startswith(("configure_s", "missing_binary"))]}
json.dump(out, open(os.path.join(logs, "gpu-check.json"), "w"), indent=1)
if raw:  # Google Benchmark's own JSON of every CUDA benchmark run, one file
    json.dump(raw, open(os.path.join(logs, "bench_cuda.json"), "w"), indent=1)

# Summary (stdout -> summary.txt).
print(f"commit {commit}" + (f" ({tree['differ_from_commit']} of {tree['files']} files differ from it)" if tree else "") +
      f"; device {device.get('name', 'none')} driver {device.get('driver')} (CUDA {device.get('driver_cuda_version')}); nvcc {toolchain['nvcc']}")
if build:
    print(f"configure {build.get('configure_s')} s, build {build.get('build_s')} s on {build.get('jobs')} jobs")
for t, e in tests.items():
    s = f"{t}: {'ok' if e['ok'] else 'FAILED'} exit={e['exit']} passed={len(e['passed'])} failed={len(e['failed'])} " \
        f"skipped={len(e['expected_skips']) + len(e['unexpected_skips'])} ({e['seconds']} s)"
    print(s)
    # At most a few lines per binary: the device tool returns only the end of the output
    # (gpu-check.json and tests.log hold them all).
    def some(items, label, k):
        items = list(items)
        for n, msg in items[:k]:
            print(f"  {label} {n}" + (f": {msg[:160]}" if msg else ""))
        if len(items) > k:
            print(f"  ... and {len(items) - k} more {label.lower()}(s): see gpu-check.json")
    some(((n, "") for n in e["failed"]), "FAILED", 8)
    some(e["unexpected_skips"].items(), "UNEXPECTED SKIP", 3)
    if gpu_visible:
        some(e["expected_skips"].items(), "expected skip", 5)
    elif e["expected_skips"]:
        print(f"  (no GPU: {len(e['expected_skips'])} skipped)")
    if "error" in e:
        print(f"  {e['error']}")
for t in missing:
    print(f"{t}: NOT BUILT")
for k, v in figures.items():
    if k == "op_harness":
        for t, h in v.items():
            cuda = list(h["cuda_tests"].values())
            print(f"op_harness {t}: CUDA tests {cuda.count('passed')} passed, {cuda.count('FAILED')} failed, "
                  f"{cuda.count('skipped')} skipped; {len(h['cuda_perf'])} CUDA performance rows")
    elif k in ("gpu_losslessness_tests", "cpu_vs_gpu_tests"):
        print(f"{k}: " + ", ".join(f"{st}" for st in [f"{sum(1 for x in v.values() if x == 'passed')} passed",
                                                          f"{sum(1 for x in v.values() if x == 'FAILED')} failed",
                                                          f"{sum(1 for x in v.values() if x == 'skipped')} skipped"]))
    else:
        print(f"{k}: {json.dumps(v)[:400]}")
for n in not_measured:
    print(f"not measured: {n}")
for n in out["notes"]:
    print(f"note: {n}")
print(f"RESULT: {result}")
PY
py_rc=$?
if [ $py_rc -ne 0 ]; then
  cat "$WORK/figures.err"
  echo "figures: python3 failed (exit $py_rc); raw results in $WORK" | tee -a "$LOGS/summary.txt"
fi
echo "== summary ($(elapsed) s; logs and gpu-check.json in $LOGS)"
cat "$LOGS/summary.txt"
result=$(sed -n 's/^RESULT: //p' "$LOGS/summary.txt" | tail -1)
case $result in
  OK) exit 0 ;;
  NO\ GPU*) exit 3 ;;
  *) [ -n "$result" ] || echo "RESULT: FAILED (no summary)"; exit 1 ;;
esac
