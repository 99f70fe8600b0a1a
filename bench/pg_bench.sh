#!/usr/bin/env bash
# The PostgreSQL store under load (issue 19): a private PostgreSQL 15
# (scripts/postgres.sh), N documents preloaded through `neardup serve
# --store postgresql://...` (bench/load_gen's batch preload, several loaders
# at once, synchronous_commit off for the preload only), then
# check-and-insert throughput and latency with 1 and 2 serve instances
# (durable: synchronous_commit on, the server's default), bytes per stored
# document (pg_total_relation_size of the namespace's tables) and the
# candidate lookup's latency in the server (pgbench, the engine's query with
# a random fingerprint, the seed's "under 1 ms at 2M rows").
#
#   bench/pg_bench.sh [N=1000000] [SECONDS=15] [PRELOADERS=4]
#
# REAL=M preloads only M real documents through the service and fills the
# rest up to N with synthetic rows in SQL (random fingerprint, content hash
# and 16 random anchors; the re-check bytes copied from the real rows), for
# a large N on a small machine: the HTTP preload runs at a few hundred
# documents per second here. Default: REAL=N (all real).
# PG_DIR=/path keeps the server and its data there (reused by the next run:
# no preload when the namespace already holds N documents); default a temp
# directory removed at exit. Results: bench/results/pg-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SECS=${2:-15}
PRELOADERS=${3:-4}
REAL=${REAL:-$N}
SERVE=${NEARDUP_SERVE:-./build/neardup-serve}
LOAD=${LOAD_GEN_BIN:-./build/load_gen}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUT=${OUT:-bench/results/pg-$(date +%F).txt}
NS=bench
PORTS=(18251 18252)
keep=${PG_DIR:+1}
DIR=${PG_DIR:-$(mktemp -d /tmp/neardup-pgbench.XXXXXX)}
chmod 755 "$DIR"
PIDS=()
log() { echo "$*" | tee -a "$OUT"; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/postgres.sh stop "$DIR/pg" >/dev/null 2>&1 || true
  [[ -n $keep ]] || rm -rf "$DIR"
}
trap cleanup EXIT

URI=$(PG_SHARED_BUFFERS=${PG_SHARED_BUFFERS:-2GB} scripts/postgres.sh start "$DIR/pg")
psqlq() { "$PGBIN/psql" "$URI" -Atq -c "$1"; }
serve() {  # serve <i> <uri>: starts instance i, waits until it listens
  local i=$1 uri=$2
  : >"$DIR/serve$i.log"
  nice -n 5 "$SERVE" --store "$uri" --listen "127.0.0.1:${PORTS[$i]}" --auto-create-namespaces true \
    --threads 16 >"$DIR/serve$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q "listening on" "$DIR/serve$i.log" && return 0; sleep 0.1; done
  echo "instance $i did not start" >&2; cat "$DIR/serve$i.log" >&2; exit 1
}
stop_serves() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
gen() { psqlq "SELECT gen FROM neardup_namespaces WHERE name = '$NS'" 2>/dev/null || true; }
stored() { local g; g=$(gen); [[ -n $g ]] && psqlq "SELECT count(*) FROM nd_${g}_docs" || echo 0; }

log "== pg_bench $(date -u +%FT%TZ) N=$N seconds=$SECS $(git rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg)"
log "   PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), shared_buffers ${PG_SHARED_BUFFERS:-2GB}, $URI"

# ---- preload (not durable: synchronous_commit off for this instance only) ----
have=$(stored)
if ((have < REAL)); then
  serve 0 "$URI?options=-c%20synchronous_commit%3Doff&pool_size=24"
  t0=$(date +%s.%N)
  per=$(((REAL - have + PRELOADERS - 1) / PRELOADERS))
  lp=()
  for ((w = 0; w < PRELOADERS; w++)); do
    "$LOAD" --port "${PORTS[0]}" --ns "$NS" --preload "$per" --seconds 0.01 --threads 1 --pregen-mb 1 \
      --seed $((RANDOM * 65536 + RANDOM + w)) >/dev/null 2>>"$DIR/preload.log" &
    lp+=($!)
  done
  for p in "${lp[@]}"; do wait "$p"; done
  t1=$(date +%s.%N)
  stop_serves
  now=$(stored)
  log "preload: $((now - have)) documents in $(printf %.0f "$(echo "$t1 - $t0" | bc)") s ($(echo "($now - $have) / ($t1 - $t0)" | bc) docs/s, $PRELOADERS loaders x 2 batches of 500, synchronous_commit off)"
fi
G=$(gen)
have=$(stored)
if ((have < N)); then
  t0=$(date +%s.%N)
  "$PGBIN/psql" "$URI" -q -v ON_ERROR_STOP=1 <<EOF
SET synchronous_commit = off;
CREATE TEMP TABLE src AS SELECT row_number() OVER () AS rn, extra FROM nd_${G}_docs WHERE id NOT LIKE 'syn-%';
INSERT INTO nd_${G}_docs (no, id, ts, fp, ch, hf, b0, b1, b2, b3, anchors, extra)
SELECT nextval('nd_${G}_no'), 'syn-' || g || '-' || $have, (SELECT max(ts) FROM nd_${G}_docs) - (g % 200000), f.fp,
       ('x' || substr(md5(g || 'c' || $have), 1, 16))::bit(64)::bigint, true,
       (f.fp & 65535)::int, ((f.fp >> 16) & 65535)::int, ((f.fp >> 32) & 65535)::int, ((f.fp >> 48) & 65535)::int,
       ARRAY(SELECT ('x' || substr(md5(g || '-' || i || '-' || $have), 1, 8))::bit(32)::int FROM generate_series(1, 16) i),
       s.extra
FROM generate_series(1, $((N - have))) g
CROSS JOIN LATERAL (SELECT ('x' || substr(md5(g || 'f' || $have), 1, 16))::bit(64)::bigint AS fp) f
JOIN src s ON s.rn = (g % (SELECT count(*) FROM src)) + 1;
EOF
  log "synthetic fill: $((N - have)) rows in $(printf %.0f "$(echo "$(date +%s.%N) - $t0" | bc)") s (SQL; random fingerprints and anchors, re-check bytes of the real rows)"
fi
log "stored: $(stored) documents in namespace $NS (tables nd_${G}_*)"
psqlq "VACUUM ANALYZE" >/dev/null

# ---- bytes per document ----
bytes=$(psqlq "SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('nd_${G}_docs') WHERE isleaf")
heap=$(psqlq "SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree('nd_${G}_docs') WHERE isleaf")
idx=$(psqlq "SELECT sum(pg_indexes_size(relid)) FROM pg_partition_tree('nd_${G}_docs') WHERE isleaf")
n=$(stored)
log "bytes per document: $((bytes / n)) total (heap $((heap / n)), indexes $((idx / n)), TOAST and the rest $(((bytes - heap - idx) / n))); pg_total_relation_size of nd_${G}_docs's partitions = $bytes"
for i in $(psqlq "SELECT indexrelid::regclass FROM pg_index i JOIN pg_partition_tree('nd_${G}_docs') t ON t.relid = i.indrelid WHERE t.isleaf LIMIT 8"); do
  log "   index $i: $(( $(psqlq "SELECT pg_relation_size('$i')") / n )) B per document"
done

# ---- a warm cache, as a serving database has (the restart above emptied shared_buffers)
psqlq "CREATE EXTENSION IF NOT EXISTS pg_prewarm" >/dev/null
psqlq "SELECT sum(pg_prewarm(relid)) FROM pg_partition_tree('nd_${G}_docs') WHERE isleaf" >/dev/null
psqlq "SELECT sum(pg_prewarm(indexrelid)) FROM pg_index i JOIN pg_partition_tree('nd_${G}_docs') t ON t.relid = i.indrelid WHERE t.isleaf" >/dev/null

# ---- lookup latency in the server (the engine's candidate query, generic plan) ----
cat >"$DIR/lookup.sql" <<EOF
\set fp random(-4611686018427387903, 4611686018427387903) * 2 + random(0, 1)
SELECT no, id, ts, fp, ch, hf, extra FROM nd_${G}_docs WHERE ts >= 0 AND (ch = :fp::bigint OR id = 'none' OR no = ANY('{}'::bigint[])
  OR ((b0 = (:fp::bigint & 65535)::int OR b1 = ((:fp::bigint >> 16) & 65535)::int OR b2 = ((:fp::bigint >> 32) & 65535)::int OR b3 = ((:fp::bigint >> 48) & 65535)::int)
      AND bit_count(int8send(fp # :fp::bigint)) <= 3)) ORDER BY no;
EOF
for c in 1 2; do
  r=$(PGOPTIONS="-c plan_cache_mode=force_generic_plan" "$PGBIN/pgbench" -n -M prepared -c $c -j $c -T "$SECS" -f "$DIR/lookup.sql" "$URI" 2>&1)
  log "lookup (pgbench -M prepared -c $c, $SECS s): $(echo "$r" | grep -E '^latency average|^tps' | tr '\n' ' ')"
done

# ---- check-and-insert, durable ----
phase() {  # phase <label> <port> <threads> [port threads]...: load_gen on each port at once
  local label=$1; shift
  local outs=() pids=() i=0
  while (($#)); do
    "$LOAD" --port "$1" --ns "$NS" --threads "$2" --seconds "$SECS" --dup-rate 0.2 --pregen-mb 50 \
      --seed $((RANDOM * 65536 + RANDOM)) >"$DIR/phase$i.json" 2>/dev/null &
    pids+=($!); outs+=("$DIR/phase$i.json"); i=$((i + 1)); shift 2
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for o in "${outs[@]}"; do log "$label: $(cat "$o")"; done
}
serve 0 "$URI"
phase "1 instance, 1 connection" "${PORTS[0]}" 1
phase "1 instance, 16 connections" "${PORTS[0]}" 16
serve 1 "$URI"
phase "2 instances, 8 connections each" "${PORTS[0]}" 8 "${PORTS[1]}" 8
stop_serves
log "stored after: $(stored); load $(cut -d' ' -f1-3 /proc/loadavg)"
