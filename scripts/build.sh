#!/usr/bin/env bash
# Configures and builds one flavour of the tree.
#   scripts/build.sh [release|asan|tsan|fuzz]   (default release)
# Build directories: build/ (release), build-asan/, build-tsan/, build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${JOBS:-$(nproc)}
case "$flavour" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan)    dir=build-asan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEARDUP_SANITIZE=address,undefined -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  tsan)    dir=build-tsan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEARDUP_SANITIZE=thread -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  # The library is instrumented too (fuzzer-no-link) so coverage reaches it.
  fuzz)    dir=build-fuzz; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DNEARDUP_BUILD_FUZZERS=ON
                                 "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined"
                                 -DNEARDUP_BUILD_TESTS=OFF -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  *) echo "usage: $0 [release|asan|tsan|fuzz]" >&2; exit 2 ;;
esac
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Re-running configure is cheap and repairs a directory left half-configured.
[[ -f "$dir/CMakeCache.txt" && ! -f "$dir/build.ninja" && ! -f "$dir/Makefile" ]] && rm -rf "$dir"
cmake -S . -B "$dir" "${generator[@]}" "${args[@]}" >/dev/null
cmake --build "$dir" -j "$jobs"
