#!/usr/bin/env bash
# Interleaved A/B timing on a shared, noisy machine (docs/BENCHMARKS.md,
# "Two threads"): each round runs every variant once, in order; after ROUNDS
# rounds, each variant's median wall time and median CPU time (user + sys).
#
#   bench/interleaved_ab.sh ROUNDS 'LABEL|ENV=V ...|COMMAND ARGS...' ...
#
# e.g. bench/interleaved_ab.sh 5 'old||./old/neardup dedup -q -t 2 -i in.jsonl -o /dev/null' \
#                                'new||./build/neardup dedup -q -t 2 -i in.jsonl -o /dev/null'
# The command's own output is discarded; its stderr is not checked.
# Under bench/hold_others.sh, nothing else at nice >= 5 runs meanwhile.
set -uo pipefail
if (( $# < 2 )); then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
rounds=$1
shift
specs=("$@")
declare -A walls cpus
for _ in $(seq 1 "$rounds"); do
  for spec in "${specs[@]}"; do
    IFS='|' read -r label envs cmd <<< "$spec"
    # shellcheck disable=SC2086  # the environment and the command are words
    out=$(env $envs /usr/bin/time -f "%e %U %S" $cmd 2>&1 >/dev/null | tail -1)
    walls[$label]+="$(awk '{print $1}' <<< "$out") "
    cpus[$label]+="$(awk '{print $2 + $3}' <<< "$out") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for spec in "${specs[@]}"; do
  IFS='|' read -r label _ _ <<< "$spec"
  echo "$label median wall $(median <<< "${walls[$label]}") cpu $(median <<< "${cpus[$label]}")  (walls: ${walls[$label]})"
done
