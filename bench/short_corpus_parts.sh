#!/usr/bin/env bash
# The input of the 200M run (docs/SCALING.md, "200M on this machine"), in
# parts that survive the end of a session:
#
#   bench/short_corpus_parts.sh DIR [PARTS [DOCS]]     (default 40 parts of 5,000,000)
#
# Part i is `bench/short_corpus.py DOCS --seed i`, zstd -3, written to
# DIR/short-200m-partNN.jsonl.zst.tmp and renamed when complete, so running
# the same command again (after a kill, a reboot, in the next session) skips
# the finished parts and redoes only the one cut short. One core each (Python,
# about 27k documents per second alone): start it twice to use two (each part
# is claimed with a lock that dies with its process), under `nice -n 19`
# beside other work. Then: bench/memory_limit_run.sh OUT 16G 'DIR/short-200m-part*.jsonl.zst'
set -euo pipefail
cd "$(dirname "$0")/.."
if (( $# < 1 )); then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
dir=$1 parts=${2:-40} docs=${3:-5000000}
mkdir -p "$dir/.locks"  # hidden: an --input DIR does not list it
for i in $(seq 1 "$parts"); do
  f=$dir/short-200m-part$(printf %02d "$i").jsonl.zst
  [[ -f $f ]] && continue
  exec {lock}>"$dir/.locks/$(basename "$f")"
  if flock -n "$lock" && [[ ! -f $f ]]; then
    python3 bench/short_corpus.py "$docs" --seed "$i" | zstd -3 -q -T1 -f -o "$f.tmp"
    mv "$f.tmp" "$f"
    echo "part $i of $parts: $(date -u)"
  fi
  exec {lock}>&-
done
