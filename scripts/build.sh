#!/usr/bin/env bash
# Configures and builds one flavour of the tree.
#   scripts/build.sh [batch|release|asan|tsan|fuzz]   (default release)
# Build directories: build/ (batch and release), build-asan/, build-tsan/, build-fuzz/.
#   batch    only the batch program build/neardup (and build/neardup-serve when
#            the service's packages are installed): what quickstart needs
#            (the Python module too where pybind11 is installed: the libraries
#            are then built with -fPIC in both flavours, so switching between
#            them recompiles no library)
#   release  everything: programs, tests, benchmarks, the Python module (build/python)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${JOBS:-$(nproc)}
case "$flavour" in
  batch)   dir=build; args=(-DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_TESTS=OFF -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release -DNEARDUP_BUILD_TESTS=ON -DNEARDUP_BUILD_BENCHMARKS=ON -DNEARDUP_PYTHON=ON) ;;
  # Sanitizer builds at -O1 with line tables only (CMakeLists adds -g1): the
  # usual sanitizer setting, and it keeps CI's compile time on two cores low.
  asan)    dir=build-asan; args=(-DNEARDUP_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
                                 -DNEARDUP_SANITIZE=address,undefined -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  tsan)    dir=build-tsan; args=(-DNEARDUP_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
                                 -DNEARDUP_SANITIZE=thread -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  # The library is instrumented too (fuzzer-no-link) so coverage reaches it.
  fuzz)    dir=build-fuzz; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                                 -DCMAKE_CXX_COMPILER=clang++ -DNEARDUP_BUILD_FUZZERS=ON
                                 "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined"
                                 -DNEARDUP_BUILD_TESTS=OFF -DNEARDUP_BUILD_BENCHMARKS=OFF -DNEARDUP_PYTHON=OFF) ;;
  *) echo "usage: $0 [batch|release|asan|tsan|fuzz]" >&2; exit 2 ;;
esac
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Re-running configure is cheap and repairs a directory left half-configured.
[[ -f "$dir/CMakeCache.txt" && ! -f "$dir/build.ninja" && ! -f "$dir/Makefile" ]] && rm -rf "$dir"
cmake -S . -B "$dir" "${generator[@]}" "${launcher[@]}" "${args[@]}" >/dev/null
targets=()
# The fuzz flavour builds its fuzzers (and the library they link), not the CLI.
[[ "$flavour" == fuzz ]] && for f in fuzz/*_fuzzer.cc; do targets+=(--target "$(basename "$f" .cc)"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"
