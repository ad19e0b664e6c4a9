#!/usr/bin/env bash
# The whole test run (what CI runs through .ci/run):
#   1. scripts/setup.sh (Debian packages);
#   2. `build`: configure, build, run every CTest test (all tiers);
#   3. interop with the kernel's Soft-RoCE (tests/interop/rxe_interop.sh:
#      ../shared's qemu harness, then our own cases), in the background from
#      the moment `build` is built: the TCG guest keeps about one core busy
#      and is the longest phase, so it runs beside the main ctest (which
#      keeps ~1.2 cores busy on average: many tests lock a resource or take
#      both processors) and phases 4 and 5; its output comes last;
#   4. `build-asan` (-DUROCE_SANITIZE=ON, ASan+UBSan): build and run the
#      GoogleTest tiers (conformance's included) and the fuzz corpus
#      replays, minus the tests labelled `debian` (they load our
#      instrumented library into uninstrumented Debian binaries, which ASan
#      does not support: the pyverbs suite among them);
#   5. `build-fuzz` (clang, -DUROCE_FUZZ=ON): the libFuzzer targets, each run
#      for a bounded time (UROCE_FUZZ_SECONDS, default 30) from its corpus.
# Every phase runs even if an earlier one fails; exits non-zero if anything
# failed. A phase that cannot run here (the interop without root, qemu or
# ../shared) says so in one line and counts as skipped.
# Bounded: every build and test run has a timeout; CTest kills a test at its
# TIMEOUT property (default 300 s here for any test without one).
# Extra CMake arguments for both trees: UROCE_CMAKE_ARGS (e.g.
# "-DUROCE_TEST_PORT_BASE=19700" when another checkout runs tests at the
# same time on this host).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${UROCE_TEST_JOBS:-2}

log() { printf '\n== [%4ds] %s\n' "$SECONDS" "$*"; }

# configure_and_build DIR [cmake args...]
configure_and_build() {
  local dir=$1
  shift
  if [[ -f $dir/CMakeCache.txt ]]; then
    # shellcheck disable=SC2086 # UROCE_CMAKE_ARGS is a list of words
    timeout 300 cmake -S "$root" -B "$dir" "$@" ${UROCE_CMAKE_ARGS:-}
  else
    # shellcheck disable=SC2086
    timeout 300 cmake -S "$root" -B "$dir" -G Ninja "$@" ${UROCE_CMAKE_ARGS:-}
  fi
  timeout 1500 cmake --build "$dir"
}

log "setup"
bash scripts/setup.sh

failed=()

log "build (build)"
interop_pid=
if configure_and_build "$root/build" -DUROCE_SANITIZE=OFF; then
  log "interop with kernel rxe: started in the background (output at the end)"
  timeout 2400 bash tests/interop/rxe_interop.sh "$root/build" >"$root/build/rxe_interop.log" 2>&1 &
  interop_pid=$!
  log "ctest: all tests (build)"
  if ! timeout 1200 ctest --test-dir "$root/build" --output-on-failure -j"$jobs" --timeout 300; then
    failed+=("ctest in build")
  fi
else
  failed+=("build")
fi

log "build (build-asan, -DUROCE_SANITIZE=ON)"
if configure_and_build "$root/build-asan" -DUROCE_SANITIZE=ON; then
  log "ctest: unit|protocol|integration|fault|conformance without debian (build-asan)"
  # Any sanitizer report fails the test: UBSan is built with
  # -fno-sanitize-recover, ASan aborts on the first error.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  if ! timeout 1200 ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs" --timeout 300 \
    -L 'unit|protocol|integration|fault|fuzz|conformance' -LE debian; then
    failed+=("ctest in build-asan")
  fi
else
  failed+=("build-asan")
fi

log "build (build-fuzz, clang, -DUROCE_FUZZ=ON)"
fuzz_args=(-DUROCE_FUZZ=ON -DUROCE_FUZZ_SECONDS="${UROCE_FUZZ_SECONDS:-30}")
if [[ ! -f $root/build-fuzz/CMakeCache.txt ]]; then
  fuzz_args+=(-G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
# shellcheck disable=SC2086
if timeout 300 cmake -S "$root" -B "$root/build-fuzz" "${fuzz_args[@]}" ${UROCE_CMAKE_ARGS:-} &&
  timeout 600 cmake --build "$root/build-fuzz" --target fuzz_all; then
  log "ctest: fuzz (build-fuzz)"
  if ! timeout 1200 ctest --test-dir "$root/build-fuzz" --output-on-failure -j"$jobs" -L fuzz; then
    failed+=("fuzzing in build-fuzz")
  fi
else
  failed+=("build-fuzz")
fi

if [[ -n $interop_pid ]]; then
  log "interop with kernel rxe (tests/interop/rxe_interop.sh): waiting for it"
  rc=0
  wait "$interop_pid" || rc=$?
  cat "$root/build/rxe_interop.log"
  ((rc == 0 || rc == 77)) || failed+=("rxe interop")
fi

log "done"
if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all passed"
