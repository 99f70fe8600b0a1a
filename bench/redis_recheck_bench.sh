#!/usr/bin/env bash
# The Redis Cluster store with and without the re-check policy, and against a
# build from before it (docs/BENCHMARKS.md, "Redis Cluster"): in one run, for
# each configuration, on a fresh local cluster (so that every configuration
# starts from the same empty key space: Redis's key table doubles at powers
# of two, which would otherwise land in some deltas and not in others)
#   * Redis commands per check: total_commands_processed summed over the
#     masters around 1,000 unique check-and-inserts from one connection;
#   * Redis memory per stored document: used_memory summed over the masters
#     before and after inserting N documents through /batch?mode=insert,
#     measured once no 10 s scratch key (nd:y:*) is left; keys per document;
#   * check latency and throughput with one instance: load_gen, 1 and 16
#     connections, 20 % reposts with one character changed.
#
#   bench/redis_recheck_bench.sh BEFORE_NEARDUP AFTER_NEARDUP LOAD_GEN OUT_FILE
#
# Env: BASE (cluster port base, default 17400), HTTP_PORT (18081), DOCS (20000),
# SECONDS_PER_RUN (15), CONFIGS (default "before off on on-sized"). Configurations:
# "before" (the old binary: plain rule), "off" and "on" (this build,
# recheck.enabled false / true), "on-sized" (on, with expected_documents = DOCS
# so anchor buckets hold tens of records), "on-a4" / "on-a0" (on-sized with 4 /
# no anchors per document).
# Everything it starts is stopped by pid; loopback only; every wait is bounded.
set -euo pipefail
[[ $# -eq 4 ]] || { sed -n 2,20p "$0" >&2; exit 2; }
before=$1 after=$2 load_gen=$3 out=$4
cd "$(dirname "$0")/.."
base=${BASE:-17400}
http_port=${HTTP_PORT:-18081}
docs=${DOCS:-20000}
secs=${SECONDS_PER_RUN:-15}
dir=$(mktemp -d /tmp/neardup-rcbench.XXXXXX)
serve_pid=""

cleanup() {
  if [[ -n $serve_pid ]]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  scripts/redis_cluster.sh stop "$dir/redis" "$base" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

log() { echo "$*" | tee -a "$out"; }

masters() {
  for p in $(seq "$base" $((base + 5))); do
    redis-cli -p "$p" info replication 2>/dev/null | grep -q '^role:master' && echo "$p"
  done
}
sum_info() {  # sum of an INFO field over the masters
  local field=$1 total=0 v
  for p in $(masters); do
    v=$(redis-cli -p "$p" info all | tr -d '\r' | awk -F: -v f="$field" '$1 == f {print $2}')
    total=$((total + v))
  done
  echo "$total"
}
# Scratch keys expire after 10 s, but Redis reclaims expired keys lazily:
# wait (bounded) until none is left so that they do not count as documents.
wait_scratch_gone() {
  local deadline=$((SECONDS + 90)) left p
  while (( SECONDS < deadline )); do
    left=0
    for p in $(masters); do
      [[ -n $(redis-cli -p "$p" --scan --pattern 'nd:y:*' | head -1) ]] && left=1
    done
    (( left == 0 )) && return 0
    sleep 2
  done
  echo "scratch keys still present after 90 s" >&2
}
sum_keys() {
  local total=0
  for p in $(masters); do total=$((total + $(redis-cli -p "$p" dbsize))); done
  echo "$total"
}

start_serve() {  # binary uri
  "$1" serve --store "$2" --auto-create-namespaces true --listen "127.0.0.1:$http_port" >>"$dir/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "serve did not start" >&2
  return 1
}
stop_serve() {
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
}
put_ns() {  # ns recheck-json
  curl -sf -X PUT "http://127.0.0.1:$http_port/v1/namespaces/$1" -d "{\"recheck\": $2}" >/dev/null
}

mkdir -p "$(dirname "$out")"
: >"$out"
log "# redis_recheck_bench $(date -u +%FT%TZ) rev $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
log "# before=$before after=$after docs=$docs seconds=$secs"
log "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
log "# $(redis-server --version)"

for config in ${CONFIGS:-before off on on-sized}; do
  scripts/redis_cluster.sh stop "$dir/redis" "$base" >/dev/null 2>&1 || true
  rm -rf "$dir/redis"
  seeds=$(scripts/redis_cluster.sh start "$dir/redis" "$base" | tail -1)
  bin=$after recheck='{"enabled": true}' uri=$seeds
  case $config in
    before) bin=$before ;;
    off) recheck='{"enabled": false}' ;;
    on) ;;
    on-sized) uri="$seeds?expected_documents=$docs" ;;
    on-a4) uri="$seeds?expected_documents=$docs" recheck='{"enabled": true, "anchors": 4}' ;;
    on-a0) uri="$seeds?expected_documents=$docs" recheck='{"enabled": true, "anchors": 0}' ;;
    *) echo "unknown configuration $config" >&2; exit 2 ;;
  esac

  start_serve "$bin" "$uri"
  tag="$config-$$"
  log ""
  log "## $config (load $(cut -d' ' -f1-3 /proc/loadavg); fresh cluster $seeds)"

  # Memory per document, from the empty cluster.
  put_ns "mem-$tag" "$recheck"
  sleep 11
  wait_scratch_gone
  m0=$(sum_info used_memory) k0=$(sum_keys)
  "$load_gen" --port "$http_port" --ns "mem-$tag" --preload "$docs" --threads 1 --seconds 1 --max-requests 1 \
    --dup-rate 0 --seed 2 --pregen-mb 1 >"$dir/mem.json"
  sleep 11
  wait_scratch_gone
  m1=$(sum_info used_memory) k1=$(sum_keys)
  log "memory: used_memory $m0 -> $m1 over the masters, $(python3 -c "print(round(($m1 - $m0) / $docs))") B per document; keys $k0 -> $k1, $(python3 -c "print(round(($k1 - $k0) / $docs, 2))") per document"

  # Commands per check: 1,000 unique checks, one connection, next to the documents above.
  put_ns "cmd-$tag" "$recheck"
  c0=$(sum_info total_commands_processed)
  "$load_gen" --port "$http_port" --ns "cmd-$tag" --threads 1 --seconds 120 --max-requests 1000 \
    --dup-rate 0 --seed 1 --pregen-mb 20 >"$dir/cmd.json"
  c1=$(sum_info total_commands_processed)
  log "commands: $((c1 - c0)) over the masters for 1000 checks ($(python3 -c "print(round(($c1 - $c0) / 1000, 1))") per check; $(cat "$dir/cmd.json"))"

  # Latency and throughput, one instance.
  for conns in 1 16; do
    put_ns "lat$conns-$tag" "$recheck"
    "$load_gen" --port "$http_port" --ns "lat$conns-$tag" --threads "$conns" --seconds "$secs" --dup-rate 0.2 \
      --seed 3 --pregen-mb 50 >"$dir/lat.json"
    log "load $conns connection(s): $(cat "$dir/lat.json")"
  done
  stop_serve
done
log ""
log "# done $(date -u +%FT%TZ)"
