#!/usr/bin/env bash
# Issue 16, the long runs of tests/redis_parity_test.cc against a local Redis
# Cluster (the test starts and stops its own, 3 masters + 3 replicas):
#   * sequential parity: SETS sets of 41 edited variants of one natural text
#     (Chinese short and English long alternate) plus 8 templated distinct
#     texts each, replayed through the embedded store (RocksDB) and the
#     cluster store: every answer must be the same;
#   * concurrency: TRIALS trials of 8..MAX_GROUP near-duplicates of a fresh
#     text sent at the same instant to two engine instances: exactly one kept.
#   scripts/cluster_parity.sh [SETS [TRIALS [MAX_GROUP]]]   (default 120 2000 32)
# Prints the figures docs/BENCHMARKS.md quotes. Needs a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
sets=${1:-120} trials=${2:-2000} max_group=${3:-32}
bin=build/neardup_tests
[[ -x $bin ]] || { echo "build first: JOBS=2 scripts/build.sh release" >&2; exit 2; }
NEARDUP_PARITY_SETS=$sets "$bin" --gtest_filter='RedisParityTest.SequentialVariants*' | grep -E '^(parity:|\[  (PASSED|FAILED) )'
NEARDUP_RACE_TRIALS=$trials NEARDUP_RACE_MAX_GROUP=$max_group "$bin" \
  --gtest_filter='RedisParityTest.ConcurrentNearDuplicates*' | grep -E '^(race:|\[  (PASSED|FAILED) )|trial [0-9]+'
