#!/usr/bin/env bash
# Every C/C++ source follows .clang-format (STYLE.md). Skips (77) without clang-format.
set -euo pipefail
root=$1
command -v clang-format >/dev/null || exit 77
cd "$root"
mapfile -t files < <(find src tests include -name '*.cc' -o -name '*.h' | sort)
clang-format --dry-run --Werror "${files[@]}"
echo "clang-format: ${#files[@]} files clean"
