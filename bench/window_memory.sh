#!/usr/bin/env bash
# The user's window in one service (issue 14): preload N short documents
# (load_gen's texts, 500 per batch request, --sync false) into a fresh store,
# sampling documents, RSS, the engine's own accounting and the sketch file
# every 30 s; then restart the store with each configuration in turn
# (interleaved, ROUNDS times) and record RSS after the restart, the restart
# time and a check-and-insert phase (durable, 64 connections).
#   bench/window_memory.sh [N=10000000] [SECONDS=15] [ROUNDS=2]
# CONFIGS: serve flags per configuration, separated by ';', each optionally
# led by the path of another neardup binary (an older build on the same
# store). Default: the sketch file (the default) against
# --sketches-in-memory true.
# NEARDUP_BIN / LOAD_GEN_BIN: the binaries; DATA_DIR: keep the store there and
# reuse it (no preload when it already holds documents).
# Results: bench/results/window-memory-<date>.txt
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
SECS=${2:-15}
ROUNDS=${3:-2}
BIN=${NEARDUP_BIN:-./build/neardup}
LOAD=${LOAD_GEN_BIN:-./build/load_gen}
CONFIGS=${CONFIGS:---sketches-in-memory false;--sketches-in-memory true}
DATA=${DATA_DIR:-$(mktemp -d /tmp/neardup_window.XXXXXX)}
mkdir -p "$DATA"
OUT=${OUT:-bench/results/window-memory-$(date +%F).txt}
PORT=18184
PID=
log() { echo "$*" | tee -a "$OUT"; }
metrics() {
  curl -s 127.0.0.1:$PORT/metrics | awk '
    /^neardup_documents /{d=$2} /^neardup_process_resident_memory_bytes /{r=$2}
    /^neardup_engine_memory_bytes /{e=$2} /^neardup_sketch_file_bytes /{s=$2} /^neardup_store_disk_bytes /{k=$2}
    END{printf "docs %.0f rss %.0f engine %.0f sketch_file %.0f store_disk %.0f rss/doc %.0f engine/doc %.0f",
        d, r, e, s, k, r/(d+1), e/(d+1)}'
}
start() {  # start [binary] <flags...>; sets PID and STARTUP_S
  local t0 bin=$BIN
  if [[ -n ${1:-} && -x $1 ]]; then bin=$1; shift; fi
  t0=$(date +%s.%N)
  : >"$DATA.log"
  # shellcheck disable=SC2068
  $bin serve --data "$DATA" --init --auto-create-namespaces true --listen 127.0.0.1:$PORT --threads 64 $@ >"$DATA.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 36000); do
    grep -q "listening on" "$DATA.log" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$DATA.log"; exit 1; }
    sleep 0.1
  done
  STARTUP_S=$(echo "$(date +%s.%N) - $t0" | bc)
}
stop() { kill -TERM "$PID"; wait "$PID" || true; PID=; }
trap '[[ -n $PID ]] && kill -9 $PID 2>/dev/null; [[ -n ${DATA_DIR:-} ]] || rm -rf "$DATA"; rm -f "$DATA.log"' EXIT

log "# window_memory $(date -Is) N=$N seconds=$SECS rounds=$ROUNDS host=$(nproc)cpu $(git rev-parse --short HEAD) server=$BIN load=$(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -z $(ls -A "$DATA" 2>/dev/null) ]]; then
  start --sync false
  $LOAD --port $PORT --ns load --preload "$N" --seconds 0 --threads 1 >"$DATA.preload" 2>&1 &
  loader=$!
  t0=$SECONDS
  while kill -0 $loader 2>/dev/null; do
    sleep 30
    log "preload t=$((SECONDS - t0)) s: $(metrics)"
  done
  log "preload: $(grep preloaded "$DATA.preload" || tail -2 "$DATA.preload")"
  log "after preload: $(metrics)"
  stop
fi
IFS=';' read -r -a configs <<<"$CONFIGS"
for round in $(seq 1 "$ROUNDS"); do
  for cfg in "${configs[@]}"; do
    read -r -a words <<<"$cfg"
    if [[ -n ${words[0]:-} && -x ${words[0]} ]]; then
      start "${words[0]}" --sync true "${words[@]:1}"
    else
      start --sync true "${words[@]}"
    fi
    log "round $round [$cfg]: restart ${STARTUP_S} s; $(metrics)"
    out=$($LOAD --port $PORT --ns load --seconds "$SECS" --threads 64)
    log "round $round [$cfg]: check-and-insert $out"
    log "round $round [$cfg]: after the phase: $(metrics)"
    stop
  done
done
