#!/usr/bin/env bash
# Command 2 of the README: the whole test suite.
#  1. Release build, every test (ctest: labels unit, threads, needs-redis,
#     needs-postgres: one private server per run, scripts/postgres.sh; slow;
#     cmake/tests.cmake), and the README's and docs' examples
#     (scripts/doctest_docs.py, also a ctest), the Python package's pytest
#     suite (python/tests), disk full under load on a small tmpfs
#     (scripts/disk_full_test.sh), and short checked histories under faults
#     (scripts/history/run_faults.sh, docs/history.md).
#  2. ASan+UBSan build (clang, with the fuzz targets), every test.
#  3. TSan build, the tests labelled threads (their own threads, no server).
#  4. A bounded libFuzzer run of every fuzz target of step 2's build, from the checked-in corpus.
# Under the sanitizers the heaviest sweeps take a stride of their cases (tests/util/sanitized.h).
# NEARDUP_TEST_QUICK=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh test >/dev/null
start=$SECONDS
step() { echo; echo "=== $* ($((SECONDS - start)) s)"; }

step "release build + tests"
scripts/build.sh release
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
# The Python package (python/, docs/python.md) against build/python, with Debian's python3 (numpy,
# pytest); one test installs it with pip into a venv. Release only: a sanitized module would need
# the sanitizer runtime preloaded into python3.
/usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests
# Disk full under load on a real tmpfs (SKIP where mounting is not allowed).
scripts/disk_full_test.sh
# Short checked histories under faults (docs/history.md): the embedded store with kill -9 and
# SIGSTOP of the instance, the cluster store with every fault kind in turn, the PostgreSQL store
# with kill -9 and SIGSTOP of an instance and crashes of the server. The long runs
# (thousands of trials) are in docs/BENCHMARKS.md.
scripts/history/run_faults.sh --store embedded --trials 1000 --faults kill-instance,stop-instance \
  --fault-every 1 --max-seconds 60 -- --timeout 5
scripts/history/run_faults.sh --trials 200 --faults kill-master,kill-instance,stop-instance,partition,migrate \
  --fault-every 2.5 --max-seconds 90 -- --timeout 5
scripts/history/run_faults.sh --store postgres --trials 200 --faults kill-instance,restart-db,stop-instance \
  --fault-every 3 --max-seconds 60 -- --timeout 5 --read-seconds 120
[[ "${NEARDUP_TEST_QUICK:-0}" == 1 ]] && exit 0

step "asan+ubsan build + tests"
scripts/build.sh asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 900

step "tsan build + concurrent tests"
scripts/build.sh tsan
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" --timeout 900 -L threads

step "fuzz smoke (libFuzzer, bounded)"
for f in build-asan/*_fuzzer; do
  [[ -x "$f" ]] || continue
  name=$(basename "$f")
  corpus=fuzz/corpus/${name%_fuzzer}
  work=$(mktemp -d)
  [[ -d "$corpus" ]] && cp -r "$corpus"/. "$work"/
  "$f" -max_total_time="${FUZZ_SECONDS:-15}" -rss_limit_mb=2048 -print_final_stats=0 "$work" 2>&1 | tail -2
  rm -rf "$work"
done
step "all test stages passed"
