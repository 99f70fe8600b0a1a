#!/usr/bin/env bash
# Configures and builds one flavour of the tree.
#   scripts/build.sh [batch|release|asan|tsan]   (default release)
# Build directories: build/ (batch and release), build-asan/ (also the fuzzers), build-tsan/.
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
  # ASan+UBSan with clang, which compiles this tree under them in about two
  # thirds of g++'s time; the same build holds the libFuzzer targets (clang's),
  # so its code is instrumented for their coverage too (fuzzer-no-link).
  asan)    dir=build-asan; args=(-DNEARDUP_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
                                 -DCMAKE_CXX_COMPILER=clang++ -DNEARDUP_SANITIZE=address,undefined
                                 -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -DNEARDUP_BUILD_FUZZERS=ON
                                 -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  tsan)    dir=build-tsan; args=(-DNEARDUP_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
                                 -DNEARDUP_SANITIZE=thread -DNEARDUP_BUILD_BENCHMARKS=OFF) ;;
  *) echo "usage: $0 [batch|release|asan|tsan]" >&2; exit 2 ;;
esac
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A build-asan/ configured with g++ (before the fuzzers moved in) is configured afresh.
[[ "$flavour" == asan && -f "$dir/CMakeCache.txt" ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$dir/CMakeCache.txt" &&
  rm -rf "$dir"
# Re-running configure is cheap and repairs a directory left half-configured.
[[ -f "$dir/CMakeCache.txt" && ! -f "$dir/build.ninja" && ! -f "$dir/Makefile" ]] && rm -rf "$dir"
cmake -S . -B "$dir" "${generator[@]}" "${launcher[@]}" "${args[@]}" >/dev/null
cmake --build "$dir" -j "$jobs"
