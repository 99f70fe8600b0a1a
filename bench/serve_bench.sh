#!/usr/bin/env bash
# Service load benchmark on loopback (issue 3): preload N short Chinese
# documents, measure restart time with N stored, then check-and-insert
# throughput and latency with --sync true and --sync false.
#   bench/serve_bench.sh [N=10000000] [SECONDS=20] [CONNECTIONS=64]
# CONNECTIONS: concurrent keep-alive connections of the load generator (its
# --threads). NEARDUP_BIN picks the server binary (an A/B run against an
# older build), LOAD_GEN_BIN the load generator.
# Results: bench/results/serve-<date>.txt (and .json lines).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
SECS=${2:-20}
THREADS=${3:-64}
BIN=${NEARDUP_BIN:-./build/neardup}
LOAD=${LOAD_GEN_BIN:-./build/load_gen}
DATA=$(mktemp -d /tmp/neardup_serve_bench.XXXXXX)
OUT=bench/results/serve-$(date +%F).txt
PORT=18181
log() { echo "$*" | tee -a "$OUT"; }
start() {  # start <sync>; sets PID and STARTUP_S (seconds until listening)
  local t0=$(date +%s.%N)
  : >"$DATA.log"
  $BIN serve --data "$DATA" --listen 127.0.0.1:$PORT --threads 64 --sync "$1" >"$DATA.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 6000); do
    grep -q "listening on" "$DATA.log" 2>/dev/null && break
    sleep 0.1
  done
  STARTUP_S=$(echo "$(date +%s.%N) - $t0" | bc)
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }
rss() { curl -s 127.0.0.1:$PORT/metrics | awk '/^neardup_process_resident_memory_bytes/ {print $2}'; }
trap 'kill -9 $PID 2>/dev/null || true; rm -rf "$DATA" "$DATA.log"' EXIT

log "# serve_bench $(date -Is) N=$N seconds=$SECS connections=$THREADS host=$(nproc)cpu $(git rev-parse --short HEAD) server=$BIN"
start false
log "preload: $($LOAD --port $PORT --ns load --preload "$N" --seconds 0 --threads 1 2>&1 | tail -2 | head -1)"
log "rss after preload: $(rss) bytes"
stop
# CONN_SWEEP="16 32 128": extra single-document phases (sync=true) at these
# connection counts, to show the throughput/latency trade-off.
CONN_SWEEP=${CONN_SWEEP:-}
SYNC_MODES=${SYNC_MODES:-true false}  # e.g. SYNC_MODES=true for a durable-only run
for sync in $SYNC_MODES; do
  start "$sync"
  log "restart with $N documents (sync=$sync): ${STARTUP_S} s until listening; rss $(rss) bytes"
  log "namespace stats: $(curl -s 127.0.0.1:$PORT/v1/namespaces/load | head -c 600)"
  log "check-and-insert sync=$sync: $($LOAD --port $PORT --ns load --threads "$THREADS" --seconds "$SECS")"
  log "batch(20) sync=$sync: $($LOAD --port $PORT --ns load --threads "$THREADS" --seconds "$SECS" --batch 20)"
  if [[ $sync == true ]]; then
    for c in $CONN_SWEEP; do
      log "check-and-insert sync=$sync connections=$c: $($LOAD --port $PORT --ns load --threads "$c" --seconds "$SECS")"
    done
  fi
  stop
done
