#!/usr/bin/env bash
# Prepares, on a Debian 12 machine with apt, everything scripts/gpu-check.sh needs to configure and
# build specmoe on the offline GPU machine, into one git-ignored folder (default .gpu-bundle/) that
# travels with the device command as a carried path:
#   debs/      the .deb files of the build dependencies (apt-get download), unpacked there into a
#              private prefix by gpu-check.sh (dpkg-deb -x, or ar + tar where dpkg is absent);
#              no network and no install into / are needed there. fmt and toml++ are used
#              header-only, GoogleTest, PCRE2 and zlib link statically (Debian ships their .a), CLI11,
#              nlohmann-json and Random123 are header-only; Google Benchmark is the one shared
#              library (Debian ships no libbenchmark.a), found through the build tree's RPATH.
#   data/      models/ and prompts/ of ../shared/data (stories260K.gguf, its expected greedy text
#              and token ids): the GPU tests find them through SPECMOE_DATA_DIR. Never committed.
#   MANIFEST   package versions and sha256 sums, the commit the bundle was made at, and the
#              newest glibc / libstdc++ symbol versions that the carried shared library
#              (libbenchmark) and the static GoogleTest archives need.
#   TREE       `git ls-files -s` at that commit: gpu-check.sh hashes the files it was sent
#              against it, so its JSON says whether the tree it built is that commit (the device
#              copy has no git history).
# The working tree plus the bundle must stay under 64 MiB (the device tool's limit): the script
# prints both sizes. Rerun it after changing the dependency list; it replaces the folder.
#
#   scripts/gpu-bundle.sh [DIR]        # default .gpu-bundle
#   GPU_BUNDLE_DATA="models prompts"   # folders of ../shared/data to copy (default)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu-bundle}
DATA_SRC=${SPECMOE_SHARED_DATA:-../shared/data}
DATA_DIRS=${GPU_BUNDLE_DATA:-models prompts}

# -dev packages specmoe configures with, plus the runtime library of the one dependency that is
# linked as a shared library. Keep in step with scripts/install-deps.sh.
PKGS=(libfmt-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
      libcli11-dev nlohmann-json3-dev libpcre2-dev librandom123-dev zlib1g-dev)

command -v apt-get > /dev/null || { echo "gpu-bundle: needs apt-get (Debian 12)" >&2; exit 1; }
if ! apt-cache show "${PKGS[0]}" > /dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
fi

rm -rf "$DIR"
mkdir -p "$DIR/debs" "$DIR/data"
(cd "$DIR/debs" && apt-get download -qq "${PKGS[@]}")

# Copy the shared test data the GPU tests read (read-only there: copy, not link; a link would
# travel as a link and point nowhere on the device).
if [ -d "$DATA_SRC" ]; then
  for d in $DATA_DIRS; do
    [ -d "$DATA_SRC/$d" ] && cp -r --no-preserve=mode "$DATA_SRC/$d" "$DIR/data/"
  done
else
  echo "gpu-bundle: $DATA_SRC not found: the stories260K GPU tests will skip on the device" >&2
fi

# The shared library that travels: the newest symbol versions it asks of glibc and libstdc++,
# for gpu-check.sh to hold against the device's before it builds.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for deb in "$DIR"/debs/libbenchmark1debian_*.deb; do dpkg-deb -x "$deb" "$tmp"; done
needs=$(find "$tmp" -name '*.so.*' -type f -exec objdump -T {} + 2>/dev/null |
        grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9][0-9.]*' | sort -u -V |
        awk -F_ '{max[$1]=$0} END {for (k in max) print max[k]}' | sort | tr '\n' ' ')

git ls-files -s > "$DIR/TREE"
# The static GoogleTest archives call into libstdc++: the newest symbol versions they need of it
# (their undefined symbols looked up in this machine's libstdc++); glibc calls in them, in
# libpcre2-8.a and in libz.a are long-standing ones.
for deb in "$DIR"/debs/libgtest-dev_*.deb; do dpkg-deb -x "$deb" "$tmp"; done
libstdcxx=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
static_needs=$(awk 'NR == FNR {need[$1] = 1; next} ($2 in need) {print $1}' \
                 <(find "$tmp" -name 'libgtest*.a' -exec nm -u {} + 2>/dev/null | awk '{print $2}' | sort -u) \
                 <(objdump -T "$libstdcxx" | grep -E '(GLIBCXX|CXXABI)_[0-9]' | awk 'NF >= 2 {print $(NF-1), $NF}') |
               sort -u -V | awk -F_ '{max[$1]=$0} END {for (k in max) print max[k]}' | sort | tr '\n' ' ')
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
{
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "commit $commit"
  echo "shared_lib_needs $needs"
  echo "static_lib_needs $static_needs"
  for deb in "$DIR"/debs/*.deb; do
    echo "deb $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(sha256sum "$deb" | cut -c1-64)"
  done
  (cd "$DIR" && find data -type f | sort | while read -r f; do echo "data $f $(stat -c %s "$f")"; done)
} > "$DIR/MANIFEST"

cat "$DIR/MANIFEST"
echo "bundle: $(du -sh "$DIR" | cut -f1) in $DIR"
# What travels with a device command: tracked files plus untracked files git does not ignore,
# plus the carried bundle.
tree_bytes=$(git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
bundle_bytes=$(du -sb "$DIR" | cut -f1)
total=$(( tree_bytes + bundle_bytes ))
echo "working tree $(( tree_bytes / 1024 )) KiB + bundle $(( bundle_bytes / 1024 )) KiB = $(( total / 1024 / 1024 )) MiB (limit 64 MiB)"
[ "$total" -lt $(( 64 * 1024 * 1024 )) ] || { echo "gpu-bundle: over the 64 MiB limit" >&2; exit 1; }
