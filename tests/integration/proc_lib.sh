#!/usr/bin/env bash
# Shared by the scripts that run unmodified Debian programs as server/client
# pairs (debian/, perftest/). Source it; it defines:
#   linebuf      argv prefix for line-buffered stdout (empty without stdbuf),
#                so a program that hangs or is killed still shows its output
#   listening P  true when something listens on TCP port P (IPv4 or IPv6)
#   dump_threads PID LABEL   what a stuck program is doing (bounded)

# stdbuf is coreutils; without it the output is block-buffered.
linebuf=()
command -v stdbuf >/dev/null 2>&1 && linebuf=(stdbuf -oL)

# From /proc/net: local address "ADDR:PORT" in hex, state 0A = LISTEN.
listening() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# State and kernel wait channel per thread, then user-space stacks if gdb is
# there (bounded by a timeout).
dump_threads() {
  local pid=$1 t
  echo "--- $2 (pid $pid) threads: name state wchan"
  for t in /proc/"$pid"/task/*; do
    printf '  %s %s %s\n' "$(cat "$t/comm" 2>/dev/null)" \
      "$(awk '{print $3}' "$t/stat" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
  done
  if command -v gdb >/dev/null 2>&1; then
    timeout 30 gdb -p "$pid" -batch -ex 'thread apply all bt 20' 2>/dev/null | grep -E '^(Thread|#)'
  fi
}
