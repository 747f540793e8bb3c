#!/usr/bin/env bash
# Offline dry run of the GPU check, without a GPU: runs scripts/gpu-check.sh in a minimal Debian 12
# root (debootstrap --variant=minbase + build-essential + python3) where none of the -dev packages
# specmoe builds with is installed, with only what the GPU machine's image is described to have
# (compilers, CMake and ninja from their Python wheels as that image has them, python3, the CUDA
# toolkit bind-mounted read-only from this machine). The source tree is copied into the root as
# the device tool sends it (tracked files and untracked files git does not ignore, plus the
# carried .gpu-bundle/; no .git). Proves that the bundle alone configures and builds the CUDA
# backend (sm_90), the GPU tests and the CUDA benchmarks; with no GPU the tests skip and
# gpu-check.sh exits 3 ("built, no GPU"), which this script expects.
#
#   scripts/gpu-bundle.sh && scripts/gpu-bundle-dryrun.sh      # as root; JOBS=2 by default
# Environment: GPU_DRYRUN_DIR (default /work/tmp-gpu: the root, wheels, output; outside the
# repository), CUDA_ROOT (default: /usr/local/cuda resolved), JOBS (2), GPU_DRYRUN_KEEP_BUILD=1
# to keep the root's previous build (an incremental rerun instead of a timed cold build),
# GPU_DRYRUN_SUITE (default bookworm; e.g. trixie for GCC 14 and glibc 2.41: a newer toolchain
# than this machine's, as the device's may be; the bundle's .debs stay Debian 12's),
# GPU_DRYRUN_FAKE_SMI=1 (put a stand-in nvidia-smi that reports an H200 on the root's PATH: the
# check then takes its GPU-visible path, finds the tests skipped for want of a device and must
# report them as unexpected skips and exit 1; a test of gpu-check.sh's own logic).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "dry run: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
[ -d .gpu-bundle/debs ] || { echo "dry run: no .gpu-bundle: run scripts/gpu-bundle.sh first" >&2; exit 1; }
DIR=${GPU_DRYRUN_DIR:-/work/tmp-gpu}
SUITE=${GPU_DRYRUN_SUITE:-bookworm}
RFS=$DIR/root; [ "$SUITE" = bookworm ] || RFS=$DIR/root-$SUITE
FAKE=${GPU_DRYRUN_FAKE_SMI:-0}
CUDA_ROOT=${CUDA_ROOT:-$(readlink -f /usr/local/cuda)}
JOBS=${JOBS:-2}
mkdir -p "$DIR"

# 1. The root: Debian 12 minbase, the C/C++ toolchain, python3; CMake and ninja from PyPI wheels
#    (unpacked, not pip-installed: the image's python3 holds them as packages).
if [ ! -x "$RFS/usr/bin/g++" ]; then
  command -v debootstrap > /dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
  debootstrap --variant=minbase "$SUITE" "$RFS" http://deb.debian.org/debian
  cp /etc/resolv.conf "$RFS/etc/resolv.conf"
  mount -t proc proc "$RFS/proc"
  chroot "$RFS" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends build-essential python3' ||
    { umount "$RFS/proc"; exit 1; }
  umount "$RFS/proc"
fi
if [ ! -x "$RFS/opt/cmake/data/bin/cmake" ]; then
  mkdir -p "$DIR/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.12 \
    --implementation cp -d "$DIR/wheels" cmake ninja
  python3 - "$DIR/wheels" "$RFS/opt" << 'PY'
import glob, os, re, sys, zipfile
# cmake/data/{bin,share} keep their layout (cmake finds its modules beside its binary); a wheel's
# *.data/scripts/ binaries (ninja) go to /opt/pybin.
for whl in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            m = re.match(r"[^/]+\.data/scripts/([^/]+)$", info.filename)
            if info.filename.startswith("cmake/data/"):
                path = z.extract(info, sys.argv[2])
            elif m:
                path = os.path.join(sys.argv[2], "pybin", m.group(1))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(z.read(info))
            else:
                continue
            os.chmod(path, ((info.external_attr >> 16) & 0o777) or 0o755)
PY
fi
PATH_IN=/opt/cmake/data/bin:/opt/pybin:/usr/local/cuda/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ "$FAKE" = 1 ]; then
  mkdir -p "$RFS/opt/fake-smi"
  cat > "$RFS/opt/fake-smi/nvidia-smi" << 'SH'
#!/bin/sh
# Stand-in for the dry run: answers like one H200 would (no GPU is behind it).
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-dry-run)" ;;
  *--query-gpu*) echo "NVIDIA H200, 580.159.04, 143771 MiB, 9.0, 1980 MHz, 3201 MHz" ;;
  *) echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |" ;;
esac
SH
  chmod +x "$RFS/opt/fake-smi/nvidia-smi"
  PATH_IN=/opt/fake-smi:$PATH_IN
fi

# 2. The tree as it travels, plus the carried bundle.
SRC=$RFS/work/specmoe
keep=""
if [ "${GPU_DRYRUN_KEEP_BUILD:-0}" = 1 ] && [ -d "$SRC/build-gpu" ]; then
  mv "$SRC/build-gpu" "$RFS/work/build-gpu.keep"; keep=1
fi
rm -rf "$SRC"; mkdir -p "$SRC"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$SRC"
cp -r .gpu-bundle "$SRC/"
[ -n "$keep" ] && mv "$RFS/work/build-gpu.keep" "$SRC/build-gpu"
rm -rf "$DIR/out"; mkdir -p "$DIR/out"

# 3. Mounts: /proc, and the CUDA toolkit read-only at the path the device image uses.
mkdir -p "$RFS$CUDA_ROOT" "$RFS/work/out"
cleanup() {  # lazily where a process still holds a mount (an interrupted run)
  for m in "$RFS/work/out" "$RFS$CUDA_ROOT" "$RFS/proc"; do
    mountpoint -q "$m" && { umount "$m" 2> /dev/null || umount -l "$m"; }
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount -t proc proc "$RFS/proc"
mount --bind "$CUDA_ROOT" "$RFS$CUDA_ROOT"
mount -o remount,bind,ro "$RFS$CUDA_ROOT"
mount --bind "$DIR/out" "$RFS/work/out"
ln -sfn "$(basename "$CUDA_ROOT")" "$RFS/usr/local/cuda"

in_root() { chroot "$RFS" env -i PATH="$PATH_IN" HOME=/root TERM=dumb LANG=C.UTF-8 "$@"; }

# 4. Evidence that the system's copies of the dependencies are not there.
echo "== the root: $(in_root sh -c '. /etc/os-release; echo $PRETTY_NAME'), glibc $(in_root getconf GNU_LIBC_VERSION)"
echo "== system copies of the build dependencies in the root (expected: none)"
in_root sh -c 'for p in /usr/include/fmt /usr/include/toml++ /usr/include/gtest /usr/include/gmock /usr/include/benchmark \
  /usr/include/CLI /usr/include/nlohmann /usr/include/pcre2.h /usr/include/Random123 /usr/include/zlib.h /usr/lib/x86_64-linux-gnu/cmake \
  /usr/share/cmake; do ls -d "$p" 2>&1; done; echo ".pc files: $(ls /usr/lib/x86_64-linux-gnu/pkgconfig /usr/share/pkgconfig 2>/dev/null | tr "\n" " ")"'
in_root sh -c 'ls /usr/lib/x86_64-linux-gnu | grep -E "fmt|toml|gtest|gmock|benchmark|pcre2|libz\." || true'
in_root sh -c 'dpkg -l | grep -E "fmt|toml|gtest|gmock|benchmark|cli11|nlohmann|pcre2|random123|zlib|pkg-config|pkgconf|cmake|ninja" || echo "dpkg: none of those packages"'
in_root sh -c 'for c in pkg-config cmake ninja nvcc g++ python3 git; do echo "$c: $(command -v $c || echo not found)"; done'

# 5. The check itself, timed.
echo "== scripts/gpu-check.sh in the root, JOBS=$JOBS"
t0=$(date +%s)
set +e
in_root bash -c "cd /work/specmoe && JOBS=$JOBS OUT=/work/out bash scripts/gpu-check.sh"
rc=$?
set -e
if [ "$FAKE" = 1 ]; then expect=1; else expect=3; fi
echo "== gpu-check.sh exit $rc after $(( $(date +%s) - t0 )) s (expected here: $expect; 3 = built, no GPU)"

# 6. What the built binaries need at run time: the CUDA runtime, glibc/libstdc++ and the carried
#    libbenchmark only (fmt and toml++ header-only; GoogleTest and PCRE2 static).
for b in specmoe tests/test_cuda_ops tests/bench_cuda_forward; do
  [ -x "$SRC/build-gpu/$b" ] || continue
  echo "-- ldd build-gpu/$b"
  in_root ldd "/work/specmoe/build-gpu/$b" | sed 's/ (0x[0-9a-f]*)//'
done
echo "== output files: $(ls "$DIR/out" | tr '\n' ' ')"
[ "$rc" -eq "$expect" ]
