#!/usr/bin/env bash
# Issue 14: scores the MinHash-LSH baseline and neardup (default, --no-recheck)
# on data/natural against the exact ground truth. Needs build/neardup and the
# labels from scripts/ground_truth.py (out/truth). Writes out/natural/scores.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
out=out/natural; mkdir -p "$out"; : > "$out/scores.jsonl"
for split in dev test; do
  for b in zh-short zh-long en-short en-long; do
    in=data/natural/$split/$b.jsonl; truth=out/truth/$split/$b.labels.jsonl
    [[ -f $truth ]] || $PY scripts/ground_truth.py "$in" --out out/truth
    for mode in default no-recheck; do
      extra=(); [[ $mode == no-recheck ]] && extra=(--no-recheck)
      d=$out/$split.$b.neardup-$mode.jsonl
      s=$(date +%s.%N); ./build/neardup dedup -q --input "$in" --output /dev/null --duplicates "$d" "${extra[@]}"; e=$(date +%s.%N)
      for t in 0.5 0.7 0.8; do
        $PY scripts/minhash_lsh.py score --truth "$truth" --tau $t "$d" |
          $PY -c "import json,sys; r=json.load(sys.stdin); r.update(split='$split', bucket='$b', method='neardup-$mode', docs_per_s=round(r['docs']/($e-$s),1)); print(json.dumps(r))" >> "$out/scores.jsonl"
      done
    done
    for t in 0.5 0.7 0.8; do
      d=$out/$split.$b.minhash-$t.jsonl
      info=$($PY scripts/minhash_lsh.py run "$in" --tau $t --out "$d")
      $PY scripts/minhash_lsh.py score --truth "$truth" --tau $t "$d" |
        $PY -c "import json,sys; r=json.load(sys.stdin); i=json.loads('''$info'''); r.update(split='$split', bucket='$b', method='minhash-lsh b%dr%d' % (i['bands'], i['rows']), docs_per_s=i['docs_per_s']); print(json.dumps(r))" >> "$out/scores.jsonl"
    done
  done
done
