#!/usr/bin/env bash
# Clang's thread-safety analysis over the sources whose locks are annotated
# (common/thread_annotations.h; docs/threads.md): each is compiled with
# its own flags from the build's compile_commands.json, by clang++ instead
# of the build's compiler, syntax only, with -Wthread-safety as an error.
# Skips (77) in one line without clang++.
# Usage: thread_safety_test.sh <source dir> <build dir>
set -euo pipefail
src=$1
build=$2
clangxx=$(command -v clang++ || command -v clang++-14 || true)
if [[ -z $clangxx ]]; then
  echo "SKIP: no clang++ (the thread-safety analysis is clang's)"
  exit 77
fi
db=$build/compile_commands.json
[[ -f $db ]] || { echo "FAIL: no $db"; exit 1; }
python3 - "$db" "$src" "$clangxx" <<'PY' >"$build/thread_safety_cmds.sh"
import json, shlex, sys, os
db, src, clang = sys.argv[1:]
want = [os.path.join(src, "src", d) for d in ("core", "net", "memory")]
for e in json.load(open(db)):
    f = e["file"]
    if not f.endswith(".cc") or not any(f.startswith(w + "/") for w in want):
        continue
    args = shlex.split(e["command"])
    i = args.index("-o"); del args[i:i + 2]
    args[0] = clang
    args += ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
    print("cd " + shlex.quote(e["directory"]) + " && " + shlex.join(args))
PY
n=$(wc -l <"$build/thread_safety_cmds.sh")
((n > 0)) || { echo "FAIL: no annotated sources in $db"; exit 1; }
fail=0
# Two at a time (the machines this runs on have two cores).
if ! tr '\n' '\0' <"$build/thread_safety_cmds.sh" | xargs -0 -P2 -I{} bash -c '{} 2>&1 | grep -E "thread-safety|error" ; exit ${PIPESTATUS[0]}' \
  >"$build/thread_safety.log" 2>&1; then
  fail=1
fi
if ((fail)) || grep -q "warning\|error" "$build/thread_safety.log"; then
  cat "$build/thread_safety.log"
  echo "FAIL: clang's thread-safety analysis"
  exit 1
fi
echo "ok: $n sources pass clang's thread-safety analysis"
