#!/usr/bin/env bash
# The layers of src/ are build targets that see only the headers of the
# layers beneath them (src/CMakeLists.txt, docs/architecture.md):
#  1. for each layer, a probe compiled with exactly the flags of one of the
#     layer's own sources fails to include a header of a layer above it (or
#     beside it), and includes what the layer may use;
#  2. no source reaches another folder by a relative path;
#  3. the target graph CMake reports (--graphviz) has no cycle and is the
#     one docs/architecture.md draws.
# Usage: layers_test.sh <source dir> <scratch dir>
set -euo pipefail
src=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
cmake -S "$src" -B "$work/tree" -G Ninja -DUROCE_BUILD_TESTS=OFF --graphviz="$work/graph/targets.dot" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
db=$work/tree/compile_commands.json
fail=0

# The compile command of `file` (relative to src/), with the source replaced
# by the probe and only syntax checked.
probe() {  # <layer's source> <header> -> exit status of the compile
  local file=$1 header=$2
  printf '#include "%s"\n' "$header" >"$work/probe.cc"
  python3 - "$db" "$src/src/$file" "$work/probe.cc" >"$work/probe.sh" <<'PY'
import json, shlex, sys
db, want, probe = sys.argv[1:]
for e in json.load(open(db)):
    if e["file"] == want:
        args = shlex.split(e["command"])
        i = args.index("-o"); del args[i:i + 2]
        args = [probe if a == want else a for a in args]
        print("cd " + shlex.quote(e["directory"]) + " && " + shlex.join(args + ["-fsyntax-only"]))
        break
else:
    sys.exit("no compile command for " + want)
PY
  bash "$work/probe.sh" >"$work/probe.log" 2>&1
}
refused() {  # <layer> <source> <header>...
  local layer=$1 file=$2; shift 2
  for h in "$@"; do
    if probe "$file" "$h"; then
      echo "FAIL: $layer includes $h"; fail=1
    elif ! grep -q "$h: No such file" "$work/probe.log"; then
      echo "FAIL: probe of $h from $layer failed for another reason:"; cat "$work/probe.log"; fail=1
    else
      echo "ok: $layer cannot include $h"
    fi
  done
}
allowed() {  # <layer> <source> <header>...
  local layer=$1 file=$2; shift 2
  for h in "$@"; do
    if probe "$file" "$h"; then echo "ok: $layer includes $h"; else
      echo "FAIL: $layer cannot include $h:"; cat "$work/probe.log"; fail=1
    fi
  done
}
refused common common/log.cc wire/packet.h transport/psn.h link/udp_link.h contract/shm_layout.h core/qp.h
allowed wire wire/packet.cc common/log.h
refused wire wire/packet.cc transport/psn.h link/udp_link.h contract/shm_layout.h core/qp.h
allowed transport transport/rc_requester.cc wire/packet.h common/log.h
refused transport transport/rc_requester.cc link/udp_link.h contract/shm_layout.h core/qp.h daemon/registry.h
allowed link link/udp_link.cc wire/packet.h common/log.h
refused link link/udp_link.cc transport/psn.h contract/shm_layout.h core/qp.h
allowed contract contract/control_client.cc transport/rc_requester.h link/udp_link.h wire/packet.h
refused contract contract/control_client.cc memory/segment.h net/net_qp.h core/qp.h daemon/registry.h
allowed memory memory/target.cc contract/shm_layout.h link/shm_link.h wire/grh.h
refused memory memory/target.cc net/net_qp.h core/qp.h daemon/registry.h verbs/objects.h
allowed net net/net_qp.cc memory/target.h contract/shm_layout.h transport/rc_requester.h link/udp_link.h
refused net net/net_qp.cc core/qp.h daemon/registry.h verbs/objects.h rdmacm/cm.h
allowed core core/qp.cc net/net_qp.h memory/target.h contract/shm_layout.h transport/rc_requester.h
refused core core/qp.cc daemon/registry.h verbs/objects.h rdmacm/cm.h
allowed daemon daemon/registry.cc contract/shm_layout.h transport/rc_responder.h link/udp_link.h
refused daemon daemon/registry.cc memory/segment.h net/net_qp.h core/qp.h verbs/objects.h rdmacm/cm.h
allowed verbs verbs/qp.cc core/qp.h
refused verbs verbs/qp.cc daemon/registry.h rdmacm/cm.h
allowed rdmacm rdmacm/id.cc contract/cm_protocol.h contract/control_protocol.h
refused rdmacm rdmacm/id.cc memory/segment.h net/net_qp.h core/qp.h daemon/registry.h verbs/objects.h

if grep -rnE '#include "\.\./' "$src/src" "$src/tools"; then
  echo "FAIL: relative includes reach around the layers"; fail=1
fi

# The graph between uroce's own targets: edges "a -> b" from the comments
# CMake writes beside each edge.
ours='^(uroce_[a-z]+|uroced|ibverbs|rdmacm|uroce|icrc_escape)$'
sed -n 's|.*// \([^ ]*\) -> \([^ ]*\)$|\1 \2|p' "$work/graph/targets.dot" |
  awk -v re="$ours" '$1 ~ re && $2 ~ re' | sort -u >"$work/edges"
if ! tsort "$work/edges" >/dev/null 2>"$work/tsort.log"; then
  echo "FAIL: the target graph has a cycle:"; cat "$work/tsort.log"; fail=1
fi
sed -n '/^```text targets/,/^```$/p' "$src/docs/architecture.md" | sed '1d;$d' |
  sed -n 's/^ *\([a-z_]*\) -> \([a-z_]*\)$/\1 \2/p' | sort -u >"$work/edges.doc"
if ! diff -u "$work/edges.doc" "$work/edges"; then
  echo "FAIL: docs/architecture.md's target graph differs from CMake's (- doc, + build)"; fail=1
fi
echo "$(wc -l <"$work/edges") edges between uroce's targets, no cycle"
exit $fail
