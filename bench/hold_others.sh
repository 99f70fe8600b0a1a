#!/usr/bin/env bash
# Runs COMMAND with every process at nice >= 5 held by SIGSTOP (a corpus
# generator, a tester's runs), stopping new ones every second, and continues
# them all afterwards, whatever COMMAND's exit.
#
#   bench/hold_others.sh COMMAND ARGS...
set -uo pipefail
(( $# >= 1 )) || { sed -n '2,6p' "$0" >&2; exit 2; }
hold() {
  while :; do
    ps -eo pid=,ni= | awk '$2 >= 5 {print $1}' | xargs -r kill -STOP 2>/dev/null
    sleep 1
  done
}
hold &
holder=$!
release() {
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  ps -eo pid=,ni=,stat= | awk '$2 >= 5 && $3 ~ /T/ {print $1}' | xargs -r kill -CONT 2>/dev/null
}
trap release EXIT
"$@"
