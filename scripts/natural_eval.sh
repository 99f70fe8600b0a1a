#!/usr/bin/env bash
# Issue 14: neardup, MinHash-LSH and the seed's plain simhash on the natural
# corpora (data/natural, dev and test splits) against the exact stream outcome
# at thresholds 0.5 / 0.7 / 0.8, n = 3; prints the table of docs/ACCURACY.md.
#   scripts/natural_eval.sh [OUT_DIR]   (needs build/neardup; default out/natural)
# The exact truth is neardup eval's own (ExactStream); scripts/ground_truth.py is
# an independent implementation of the same definition, for cross-checks.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/natural}
mkdir -p "$out"
for split in dev test; do
  for b in zh-short zh-long en-short en-long; do
    ./build/neardup eval --input "data/natural/$split/$b.jsonl" --shingle-size 3 --runs "${RUNS:-1}" \
      --json "$out/$split-$b.json" > "$out/$split-$b.txt"
  done
done
python3 scripts/natural_table.py "$out"
