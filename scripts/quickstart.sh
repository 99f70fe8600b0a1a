#!/usr/bin/env bash
# Command 1 of the README: install what is needed, build (Release), and
# deduplicate the bundled sample corpus, printing the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh core
scripts/build.sh batch
out=${OUT:-out/sample}
mkdir -p "$out"
./build/neardup dedup --input data/sample/docs.jsonl \
  --output "$out/unique.jsonl" --duplicates "$out/dups.jsonl" --clusters "$out/clusters.jsonl" \
  --stats-json "$out/stats.json"
echo "outputs in $out/: unique.jsonl dups.jsonl clusters.jsonl stats.json"
