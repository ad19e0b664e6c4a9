#!/usr/bin/env bash
# bench/ab.sh - uroce at another commit (A) against the working tree's
# build/ (B) under the same perftest rows, alternating A, B, A, B... in one
# run, so that both meet the same machine (bench/README.md).
#   1. builds commit REV in a detached worktree under the output directory
#      (ibverbs, rdmacm, uroced, xdp_pingpong) and the working tree's build/;
#      snapshots both (lib/ and bin/, as run.sh does);
#   2. runs bench/harness.py N times per build, alternating, one pass each
#      (--no-sweeps), into DIR/A/<i> and DIR/B/<i>;
#   3. bench/ab_report.py: per row, the median and [min-max] of each build,
#      B/A, and whether B is within noise of A (its range reaches A's) or
#      better; stdout and DIR/ab.md.
# Root for the veth group (network namespaces); bounded like run.sh.
#
# Usage: bench/ab.sh REV [-r N] [-o DIR] [-g GROUPS] [--no-setup]
#   REV        the commit to compare against (A), e.g. HEAD~3 or a hash
#   -r N       passes per build (default 3)
#   -o DIR     output directory (default bench/out/ab-<timestamp>)
#   -g GROUPS  harness groups (default uroce,uroce_udp,veth: every row uroce
#              is in; the peers' rows do not depend on uroce)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rev=${1:?usage: bench/ab.sh REV [-r N] [-o DIR] [-g GROUPS] [--no-setup]}
shift
reps=3
out=
groups=uroce,uroce_udp,veth
setup=1
while (($#)); do
  case $1 in
    -r) reps=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -g) groups=$2; shift 2 ;;
    --no-setup) setup=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "ab.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-$root/bench/out/ab-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/bin" "$out/logs"
out=$(cd "$out" && pwd)
say() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
targets=(ibverbs rdmacm uroced xdp_pingpong)

((setup)) && timeout 1800 bash bench/setup.sh

# build_snapshot SRC BUILD SNAP: builds the targets in BUILD from SRC and
# copies what the harness runs into SNAP.
build_snapshot() {
  local src=$1 build=$2 snap=$3
  if [[ -f $build/CMakeCache.txt ]]; then
    timeout 600 cmake -S "$src" -B "$build" >>"$out/logs/cmake.log"
  else
    timeout 600 cmake -S "$src" -B "$build" -G Ninja -DUROCE_BUILD_TESTS=OFF >>"$out/logs/cmake.log"
  fi
  timeout 1800 cmake --build "$build" --target "${targets[@]}" >>"$out/logs/cmake.log" 2>&1 ||
    { tail -30 "$out/logs/cmake.log" >&2; exit 1; }
  mkdir -p "$snap/lib" "$snap/bin"
  cp -a "$build"/lib/libibverbs.so* "$build"/lib/librdmacm.so* "$snap/lib/"
  cp -a "$build/bin/uroced" "$build/bin/xdp_pingpong" "$snap/bin/"
  echo "commit: $(git -C "$src" log -1 --format='%h %s')" >"$snap/VERSION"
  git -C "$src" status --porcelain -- src include CMakeLists.txt cmake | sed 's/^/uncommitted: /' >>"$snap/VERSION"
}

say "build: A = $rev (worktree in $out/a-src)"
git worktree add --detach "$out/a-src" "$rev" >"$out/logs/worktree.log" 2>&1
trap 'git worktree remove --force "$out/a-src" >/dev/null 2>&1 || true' EXIT
build_snapshot "$out/a-src" "$out/a-build" "$out/A/uroce"
say "build: B = the working tree (build/)"
build_snapshot "$root" "$root/build" "$out/B/uroce"
for src in bench/src/*.c; do
  # (those bench/CMakeLists.txt builds against uroce's libibverbs are in build/bin)
  grep -q "src/$(basename "$src")" bench/CMakeLists.txt && continue
  gcc -O2 -Wall -Wextra -pthread -o "$out/bin/$(basename "$src" .c)" "$src"
done

for i in $(seq "$reps"); do
  for side in A B; do
    # The veth group runs its raw AF_XDP floor from bin/ (the same program for both sides).
    cp -a "$out/$side/uroce/bin/xdp_pingpong" "$out/bin/"
    say "pass $i/$reps: $side"
    timeout --kill-after=60 "${BENCH_BUDGET:-3600}" /usr/bin/python3 bench/harness.py \
      --out "$out/$side/$i" --bin "$out/bin" --uroce "$out/$side/uroce" -r 1 --no-sweeps --groups "$groups" ||
      say "harness ($side, pass $i) exited with $?; comparing what was measured"
  done
done
/usr/bin/python3 bench/ab_report.py "$out" | tee "$out/ab.md"
say "done; raw data and logs in $out"
