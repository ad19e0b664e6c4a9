#!/usr/bin/env bash
# The environment variables uroce reads are named in four places that must
# agree: the code (getenv), the public header (UROCE_ENV_* macros), the
# README's table, and uroce(7) (man/uroce.7). Usage: env_table_test.sh <source dir>
set -euo pipefail
root=$1
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -rhoE 'getenv\("UROCED?_[A-Z_]+"\)' src tools | sed 's/getenv("\(.*\)")/\1/' | sort -u >"$tmp/code"
sed -n 's/^#define UROCE_ENV_[A-Z_]* "\([A-Z_]*\)"$/\1/p' include/uroce/uroce.h | sort -u >"$tmp/header"
sed -n 's/^| `\(UROCED\{0,1\}_[A-Z_]*\)` |.*/\1/p' README.md | sort -u >"$tmp/readme"
sed -n '/^\.SH ENVIRONMENT/,/^\.SH [^E]/s/^\.B \(UROCED\{0,1\}_[A-Z_]*\)$/\1/p' man/uroce.7 | sort -u >"$tmp/man"
fail=0
diff -u --label code --label include/uroce/uroce.h "$tmp/code" "$tmp/header" || fail=1
diff -u --label code --label README.md "$tmp/code" "$tmp/readme" || fail=1
diff -u --label code --label man/uroce.7 "$tmp/code" "$tmp/man" || fail=1
[ -s "$tmp/code" ] || { echo "no getenv found: the check itself is broken"; fail=1; }
[ $fail = 0 ] && echo "$(wc -l <"$tmp/code") variables: code, header, README and uroce(7) agree"
exit $fail
