#!/usr/bin/env bash
# A long `neardup dedup --memory-limit` run that survives the end of a session
# (docs/SCALING.md, "200M on this machine"):
#
#   bench/memory_limit_run.sh OUT LIMIT INPUT...
#   e.g. bench/memory_limit_run.sh /work/run200m 16G '/work/data200m/short-200m-part*.jsonl.zst'
#
# Runs dedup with --checkpoint OUT/ckpt, so running the same command again
# after a kill continues after the last completed input file (docs/cli.md,
# "Resuming a run in rounds"). Appends to OUT/log.txt the command, the
# machine's load, every stderr line (round ends, progress) and /usr/bin/time's
# wall, CPU and peak RSS; samples the process's RSS every 30 s into
# OUT/rss.txt. Outputs: OUT/kept.jsonl.zst, OUT/dups.jsonl.zst,
# OUT/stats.json. The sketch file and spill go under OUT too (a disk with
# room: about 15 GB per round's sketches at 200M, docs/SCALING.md).
# NEARDUP_BIN=PATH runs that binary instead of build/neardup: a run that spans
# sessions keeps one build while the tree changes (docs/SCALING.md). Returns
# dedup's exit code.
set -uo pipefail
cd "$(dirname "$0")/.."
if (( $# < 3 )); then
  sed -n '2,19p' "$0" >&2
  exit 2
fi
out=$1 limit=$2
shift 2
mkdir -p "$out/sketch"
bin=${NEARDUP_BIN:-$PWD/build/neardup}
log=$out/log.txt
cmd=("$bin" dedup -i "$@" -o "$out/kept.jsonl.zst" -d "$out/dups.jsonl.zst" --memory-limit "$limit"
     --checkpoint "$out/ckpt" --sketch-dir "$out/sketch" -t 2 --progress 300 --stats-json "$out/stats.json")
{
  echo "=== $(date -u) tree $(git rev-parse --short HEAD), binary $bin ($(md5sum < "$bin" | cut -c1-12)); $(nproc) cores; load: $(cat /proc/loadavg)"
  echo "free: $(free -g | awk '/Mem:/ {print $2 " GiB total, " $7 " GiB available"}'); disk: $(df -h "$out" | awk 'NR==2 {print $4 " free"}'); transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  echo "${cmd[*]}"
} >> "$log"
/usr/bin/time -f "wall %e cpu %U+%S maxrss_kb %M" -a -o "$log" "${cmd[@]}" 2>> "$log" &
timer=$!
# The RSS of dedup itself (time's child), every 30 s while it runs.
(
  while kill -0 "$timer" 2>/dev/null; do
    pid=$(pgrep -P "$timer" | head -1)
    [[ -n "$pid" ]] && echo "$(date -u +%H:%M:%S) $(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)" >> "$out/rss.txt"
    sleep 30
  done
) &
wait "$timer"
rc=$?
echo "rc=$rc $(date -u); load: $(cat /proc/loadavg)" >> "$log"
exit "$rc"
