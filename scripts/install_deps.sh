#!/usr/bin/env bash
# Installs every Debian 12 package the build, tests, benchmarks and fuzzers use.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config
  libicu-dev libxxhash-dev libsimdjson-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  librocksdb-dev libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev wrk
  clang libclang-rt-14-dev
  python3 curl bc
  libfaiss-dev postgresql-15 libpq-dev  # peers benchmark (bench/peers)
  redis-server libhiredis-dev           # Redis Cluster store
)
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
echo "install_deps: all packages present"
