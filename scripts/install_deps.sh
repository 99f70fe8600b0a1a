#!/usr/bin/env bash
# Installs the Debian 12 packages one use of the tree needs, and nothing more.
#   scripts/install_deps.sh [core] [service] [distributed] [test] [bench] ...   (default: core)
#     core     build the batch program `neardup` (scripts/quickstart.sh)
#     service  + the service `neardup serve` (RocksDB, hiredis, libpq for --store postgresql://)
#     distributed  + Dask distributed (scheduler, workers, client) for the staged
#              run's driver scripts/dask_dedup.py (docs/SCALING.md)
#     test     + the test suite: GoogleTest, a Redis server for the cluster
#              tests, Dask distributed for the staged run's test, PostgreSQL 15 for the PostgreSQL store's (scripts/postgres.sh), clang for the fuzzers, curl/python3 for the doc examples, the zstd program for scripts/check_dedup_output.py,
#              nginx + openssl for the TLS proxy test (scripts/tls_proxy_test.sh),
#              pybind11 + pytest for the Python package (python/, docs/python.md)
#     bench    + benchmark and peer stacks: Google Benchmark is in test (the
#              benchmarks build with the tests); this adds wrk, nginx, faiss,
#              PostgreSQL (bench/peers.sh, bench/serve_bench.sh)
set -euo pipefail
core=(build-essential cmake ninja-build pkg-config
      libicu-dev libxxhash-dev libsimdjson-dev nlohmann-json3-dev libcli11-dev
      zlib1g-dev libzstd-dev)
service=(librocksdb-dev libhiredis-dev libpq-dev)
test=(libgtest-dev python3-numpy nftables libgmock-dev googletest libbenchmark-dev
      libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
      redis-server postgresql-15 clang libclang-rt-14-dev python3 curl bc nginx openssl
      pybind11-dev python3-pybind11 python3-dev python3-pytest python3-venv zstd)
distributed=(python3-distributed)
bench=(wrk nginx libfaiss-dev postgresql-15 libpq-dev hyperfine)

profiles=("$@")
((${#profiles[@]})) || profiles=(core)
PKGS=("${core[@]}")
for p in "${profiles[@]}"; do
  case "$p" in
    core) ;;
    service) PKGS+=("${service[@]}") ;;
    distributed) PKGS+=("${distributed[@]}") ;;
    test) PKGS+=("${service[@]}" "${test[@]}" "${distributed[@]}") ;;
    bench) PKGS+=("${service[@]}" "${test[@]}" "${distributed[@]}" "${bench[@]}") ;;
    *) echo "usage: $0 [core] [service] [distributed] [test] [bench]" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install_deps (${profiles[*]}): all packages present"
