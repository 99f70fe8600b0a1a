#!/usr/bin/env bash
# SIGKILL soak of `dedup --memory-limit --checkpoint` (not CI: minutes to
# hours): one uninterrupted run, then the same run killed with SIGKILL at
# random moments and restarted until it succeeds; the outputs (kept,
# duplicates, --save-index) must be byte for byte the uninterrupted run's.
# After KILLS kills the run is left to finish (a round longer than the
# interval would otherwise never end).
#   scripts/kill9_rounds.sh INPUT [MEMORY_LIMIT=64M] [MAX_SECONDS_BETWEEN_KILLS=30] [KILLS=8] [BUILD=build]
set -euo pipefail
input=$1 limit=${2:-64M} most=${3:-30} max_kills=${4:-8} build=${5:-build}
cli=$(cd "$(dirname "$0")/.." && pwd)/$build/neardup
work=$(mktemp -d "${TMPDIR:-/tmp}/neardup-kill9.XXXXXX")
trap 'rm -rf "$work"' EXIT
run() {  # run TAG [extra flags...]
  local tag=$1; shift
  "$cli" dedup -q -i "$input" -o "$work/$tag.kept" -d "$work/$tag.dups" --save-index "$work/$tag.ix" \
    --memory-limit "$limit" --spill-dir "$work" -t 2 "$@"
}
t0=$(date +%s)
run one
echo "uninterrupted: $(( $(date +%s) - t0 )) s"
kills=0 resumed=0
t0=$(date +%s)
while :; do
  run ck --checkpoint "$work/ck" 2>>"$work/ck.err" &
  pid=$!
  sleep "$(( RANDOM % most + 1 ))"
  if (( kills < max_kills )) && kill -0 "$pid" 2>/dev/null; then
    [[ -e "$work/ck/rounds/rounds.json" ]] && resumed=$((resumed + 1))
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    kills=$((kills + 1))
    continue
  fi
  wait "$pid" && break
  echo "FAIL: the checkpointed run exited with $?"; cat "$work/ck.err"; exit 1
done
echo "killed $kills times ($resumed with a round recorded), $(( $(date +%s) - t0 )) s in all"
for f in kept dups ix/kept.ndk ix/manifest.json; do
  cmp "$work/one.$f" "$work/ck.$f" || { echo "FAIL: $f differs"; exit 1; }
done
[[ ! -e "$work/ck" ]] || { echo "FAIL: the checkpoint was left behind"; exit 1; }
echo "PASS: the same kept, duplicates and saved index"
