#!/usr/bin/env bash
# Checks that our libibverbs.so.1 exports exactly what the system's does:
#   1. every defined dynamic symbol as "name@@VERSION" (default) or
#      "name@VERSION" (hidden compat twin), with its type (FUNC/OBJECT) and,
#      for data objects, its size;
#   2. the version definitions and their inheritance chain;
#   3. the SONAME.
# A client linked BIND_NOW against the real library fails to load if any
# "name@VERSION" it imports is missing, so the sets must be equal.
#
# Usage: exports_test.sh OUR_LIB [REFERENCE_LIB]
#   REFERENCE_LIB defaults to /usr/lib/x86_64-linux-gnu/libibverbs.so.1.
# Exit: 0 pass, 1 mismatch, 2 usage error, 77 skipped (no reference library
# or no readelf).
set -euo pipefail

ours=${1:-}
ref=${2:-/usr/lib/x86_64-linux-gnu/libibverbs.so.1}

if [[ -z "$ours" ]]; then
  echo "usage: $0 OUR_LIB [REFERENCE_LIB]" >&2
  exit 2
fi
if [[ ! -f "$ours" ]]; then
  echo "FAIL: library under test not found: $ours" >&2
  exit 1
fi
if ! command -v readelf >/dev/null 2>&1; then
  echo "SKIP: readelf not installed (binutils)" >&2
  exit 77
fi
if [[ ! -f "$ref" ]]; then
  echo "SKIP: reference library not found: $ref (install libibverbs1)" >&2
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "name@VER TYPE" (plus " size=N" for OBJECTs) for every defined global or
# weak dynamic symbol. Unversioned names are printed bare, so they show up
# as a difference rather than being dropped.
dyn_exports() {
  LC_ALL=C readelf --dyn-syms --wide "$1" | awk '
    $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 != "UND" &&
    ($5 == "GLOBAL" || $5 == "WEAK") {
      line = $8 " " $4
      if ($4 == "OBJECT") line = line " size=" ($3 + 0)
      print line
    }' | LC_ALL=C sort -u
}

# Version definitions: "NAME" or "NAME <- PARENT" (the file's BASE entry, its
# soname, is left out; the SONAME is compared separately).
version_defs() {
  LC_ALL=C readelf --version-info --wide "$1" | awk '
    /^Version definition section/ { in_d = 1; next }
    /^Version (needs|symbols) section/ { in_d = 0 }
    !in_d { next }
    / Flags: BASE / { next }
    /Name: / { if (cur != "") print cur; cur = $NF; next }
    /Parent [0-9]+: / { if (cur != "") print cur " <- " $NF; cur = "" }
    END { if (cur != "") print cur }' | LC_ALL=C sort -u
}

soname() {
  LC_ALL=C readelf --dynamic --wide "$1" |
    sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p'
}

status=0

# report LABEL REF_FILE OURS_FILE: prints what is missing and what is extra.
report() {
  local label=$1 want=$2 have=$3
  if cmp -s "$want" "$have"; then
    echo "ok: $label ($(wc -l <"$want") entries)"
    return
  fi
  status=1
  echo "FAIL: $label differ ($ref vs $ours)"
  LC_ALL=C comm -23 "$want" "$have" >"$tmp/missing"
  LC_ALL=C comm -13 "$want" "$have" >"$tmp/extra"
  if [[ -s "$tmp/missing" ]]; then
    echo "  missing from ours (present in the reference):"
    sed 's/^/    - /' "$tmp/missing"
  fi
  if [[ -s "$tmp/extra" ]]; then
    echo "  extra in ours (absent from the reference):"
    sed 's/^/    + /' "$tmp/extra"
  fi
}

dyn_exports "$ref" >"$tmp/ref.syms"
dyn_exports "$ours" >"$tmp/ours.syms"
if [[ ! -s "$tmp/ref.syms" ]]; then
  echo "FAIL: no versioned exports read from $ref (readelf output changed?)" >&2
  exit 1
fi
report "dynamic symbols (name@version type)" "$tmp/ref.syms" "$tmp/ours.syms"

version_defs "$ref" >"$tmp/ref.vers"
version_defs "$ours" >"$tmp/ours.vers"
report "version definitions (name <- parent)" "$tmp/ref.vers" "$tmp/ours.vers"

soname "$ref" >"$tmp/ref.soname"
soname "$ours" >"$tmp/ours.soname"
report "SONAME" "$tmp/ref.soname" "$tmp/ours.soname"

exit "$status"
