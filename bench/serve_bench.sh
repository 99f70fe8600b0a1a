#!/usr/bin/env bash
# Service load benchmark on loopback (issue 3): preload N short Chinese
# documents, measure restart time with N stored, then check-and-insert
# throughput and latency with --sync true and --sync false.
#   bench/serve_bench.sh [N=10000000] [SECONDS=20] [CONNECTIONS=64]
# CONNECTIONS: concurrent keep-alive connections of the load generator (its
# --threads). NEARDUP_BIN picks the server binary (an A/B run against an
# older build), LOAD_GEN_BIN the load generator, SERVE_FLAGS extra flags of the
# measured server starts (e.g. SERVE_FLAGS="--commit-delay-us 500"; the preload
# start does not get them).
# Results: bench/results/serve-<date>.txt (and .json lines).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
SECS=${2:-20}
THREADS=${3:-64}
BIN=${NEARDUP_BIN:-./build/neardup}
LOAD=${LOAD_GEN_BIN:-./build/load_gen}
# DATA_DIR=/path: keep the preloaded store there and reuse it on the next run
# (no preload when it already holds documents); kept at exit.
if [[ -n ${DATA_DIR:-} ]]; then
  DATA=$DATA_DIR
  mkdir -p "$DATA"
else
  DATA=$(mktemp -d /tmp/neardup_serve_bench.XXXXXX)
fi
OUT=${OUT:-bench/results/serve-$(date +%F).txt}
PORT=18181
log() { echo "$*" | tee -a "$OUT"; }
start() {  # start <sync> [flags...]; sets PID and STARTUP_S (seconds until listening)
  local t0=$(date +%s.%N)
  : >"$DATA.log"
  $BIN serve --data "$DATA" --init --auto-create-namespaces true --listen 127.0.0.1:$PORT --threads 64 --sync "$@" >"$DATA.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 6000); do
    grep -q "listening on" "$DATA.log" 2>/dev/null && break
    sleep 0.1
  done
  STARTUP_S=$(echo "$(date +%s.%N) - $t0" | bc)
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }
rss() { curl -s 127.0.0.1:$PORT/metrics | awk '/^neardup_process_resident_memory_bytes/ {print $2}'; }
trap 'kill -9 $PID 2>/dev/null || true; [[ -n ${DATA_DIR:-} ]] || rm -rf "$DATA"; rm -f "$DATA.log"' EXIT
metric() { curl -s 127.0.0.1:$PORT/metrics | awk -v m="$1" '$1 == m {print $2}'; }
# phase <label> <load_gen args...>: one load phase, with the server's CPU per
# request (/proc/PID/stat) and the documents per group commit during it.
phase() {
  local label=$1
  shift
  local c0 k0 d0 c1 k1 d1 out
  c0=$(awk '{print $14 + $15}' /proc/$PID/stat)
  k0=$(metric neardup_store_commits_total)
  d0=$(metric neardup_store_commit_documents_total)
  out=$($LOAD --port $PORT --ns load --seconds "$SECS" "$@")
  c1=$(awk '{print $14 + $15}' /proc/$PID/stat)
  k1=$(metric neardup_store_commits_total)
  d1=$(metric neardup_store_commit_documents_total)
  log "$label: $out server: $(python3 - "$out" "$c0" "$c1" "$k0" "$k1" "$d0" "$d1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
out, c0, c1, k0, k1, d0, d1, tck = sys.argv[1:]
r = max(json.loads(out)["requests"], 1)
cpu_us = (float(c1) - float(c0)) * 1e6 / float(tck) / r
docs = (float(d1) - float(d0)) / max(float(k1) - float(k0), 1)
print("cpu_us_per_request=%.1f docs_per_commit=%.1f" % (cpu_us, docs))
PY
)"
}

log "# serve_bench $(date -Is) N=$N seconds=$SECS connections=$THREADS host=$(nproc)cpu $(git rev-parse --short HEAD) server=$BIN flags=${SERVE_FLAGS:-none}"
if [[ -z $(ls -A "$DATA") ]]; then
  start false
  log "preload: $($LOAD --port $PORT --ns load --preload "$N" --seconds 0 --threads 1 2>&1 | tail -2 | head -1)"
  log "rss after preload: $(rss) bytes"
  stop
else
  log "reusing the store in $DATA (no preload)"
fi
# CONN_SWEEP="16 32 128": extra single-document phases (sync=true) at these
# connection counts, to show the throughput/latency trade-off.
CONN_SWEEP=${CONN_SWEEP:-}
SYNC_MODES=${SYNC_MODES:-true false}  # e.g. SYNC_MODES=true for a durable-only run
for sync in $SYNC_MODES; do
  # shellcheck disable=SC2086  # SERVE_FLAGS is a list of flags
  start "$sync" ${SERVE_FLAGS:-}
  log "restart with $N documents (sync=$sync): ${STARTUP_S} s until listening; rss $(rss) bytes"
  log "namespace stats: $(curl -s 127.0.0.1:$PORT/v1/namespaces/load | head -c 600)"
  phase "check-and-insert sync=$sync" --threads "$THREADS"
  [[ -n ${NO_BATCH:-} ]] || phase "batch(20) sync=$sync" --threads "$THREADS" --batch 20
  if [[ $sync == true ]]; then
    for c in $CONN_SWEEP; do
      phase "check-and-insert sync=$sync connections=$c" --threads "$c"
    done
  fi
  stop
done
