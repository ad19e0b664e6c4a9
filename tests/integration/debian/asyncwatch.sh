#!/usr/bin/env bash
# ibv_asyncwatch opens the device and blocks reading async events forever.
# Pass: it prints its "<dev>: async event FD <n>" line and is still running
# about a second later; then this script stops it.
# Usage: asyncwatch.sh DEVICE   Exit: 0 pass, 1 fail, 77 skipped.
set -u
dev=${1:?usage: asyncwatch.sh DEVICE}
command -v ibv_asyncwatch >/dev/null 2>&1 || { echo "SKIP: ibv_asyncwatch not installed"; exit 77; }

out=$(mktemp "${TMPDIR:-/tmp}/uroce-asyncwatch.XXXXXX")
pid=
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -f "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The outer timeout is only a backstop; the script stops it well before.
timeout --kill-after=5 30 ibv_asyncwatch -d "$dev" >"$out" 2>&1 &
pid=$!

line_re="^${dev}: async event FD [0-9]+$"
deadline=$((SECONDS + 15))
until grep -Eq "$line_re" "$out"; do
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
    break
  fi
  sleep 0.05
done
sleep 1
alive=0
kill -0 "$pid" 2>/dev/null && alive=1

echo "----- ibv_asyncwatch -d $dev -----"
cat "$out"
echo "-----"
if ! grep -Eq "$line_re" "$out"; then
  echo "FAIL: no '$dev: async event FD <n>' line"
  exit 1
fi
if ((!alive)); then
  wait "$pid"
  echo "FAIL: ibv_asyncwatch exited by itself (status $?) instead of waiting for events"
  pid=
  exit 1
fi
echo "PASS: ibv_asyncwatch is watching $dev"
