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
# a large N on a small machine. Default: REAL=N (all real).
# IMPORT=FILE.jsonl: the preload is instead `neardup pg-import` of FILE's
# first N lines (one transaction written with COPY, the rows the service's
# checks would leave: docs/postgresql.md "Bulk import"); N then becomes the
# number of documents kept (duplicates are not stored).
# BASE_SERVE=/path/to/an/earlier/neardup-serve: A/B. The same documents are
# copied into a second database (`base`) whose namespace that build
# creates (the documents' table has the same columns in both layouts), and
# the load phases alternate between the two builds, ROUNDS times (default 2).
# PHASES=0: no check-and-insert phases (sizes and lookups only).
# The lookup runs the query of the namespace's layout (the record's
# "layout": 3 = the engine's block sub-selects, index-only; 2 and before =
# one OR of the blocks, a BitmapOr) on a random fingerprint, ROUNDS times
# per build, alternating, after an EXPLAIN (ANALYZE, BUFFERS) of one.
# OLD_QUERY=1: also that OR query on this build's tables. LOOKUP_ROUNDS:
# the lookup's rounds (default ROUNDS with BASE_SERVE, else 1).
# PROFILE=1: then each build's server time per statement (every statement
# logged for SECONDS at 1 connection; bench/pg_statement_times.py).
# PG_DIR=/path keeps the server and its data there (reused by the next run:
# no preload when the namespace already holds N documents); default a temp
# directory removed at exit. PG_PORT: the server's port (default: the first
# free one of scripts/postgres.sh's range). Results: bench/results/pg-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SECS=${2:-15}
PRELOADERS=${3:-4}
REAL=${REAL:-$N}
SERVE=${NEARDUP_SERVE:-./build/neardup-serve}
BASE=${BASE_SERVE:-}
ROUNDS=${ROUNDS:-2}
LOAD=${LOAD_GEN_BIN:-./build/load_gen}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUT=${OUT:-bench/results/pg-$(date +%F).txt}
NS=bench
PORTS=(${SERVE_PORTS:-18251 18252})
keep=${PG_DIR:+1}
DIR=${PG_DIR:-$(mktemp -d /tmp/neardup-pgbench.XXXXXX)}
mkdir -p "$DIR" && chmod 755 "$DIR"
PIDS=()
log() { echo "$*" | tee -a "$OUT"; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/postgres.sh stop "$DIR/pg" >/dev/null 2>&1 || true
  [[ -n $keep ]] || rm -rf "$DIR"
}
trap cleanup EXIT

URI=$(PG_SHARED_BUFFERS=${PG_SHARED_BUFFERS:-2GB} scripts/postgres.sh start "$DIR/pg" ${PG_PORT:-})
BURI=${URI%/*}/base
psqlq() { "$PGBIN/psql" "${2:-$URI}" -Atq -c "$1"; }
serve() {  # serve <i> <binary> <uri>: starts instance i, waits until it listens
  local i=$1 bin=$2 uri=$3
  : >"$DIR/serve$i.log"
  nice -n 5 "$bin" --store "$uri" --listen "127.0.0.1:${PORTS[$i]}" --auto-create-namespaces true \
    --threads 16 >"$DIR/serve$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q "listening on" "$DIR/serve$i.log" && return 0; sleep 0.1; done
  echo "instance $i did not start" >&2; cat "$DIR/serve$i.log" >&2; exit 1
}
stop_serves() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
gen() { psqlq "SELECT gen FROM neardup_namespaces WHERE name = '$NS'" "${1:-$URI}" 2>/dev/null || true; }
stored() { local g; g=$(gen "${1:-$URI}"); [[ -n $g ]] && psqlq "SELECT count(*) FROM nd_${g}_docs" "${1:-$URI}" || echo 0; }
has_anchor_table() { [[ $(psqlq "SELECT to_regclass('nd_$1_anchors') IS NOT NULL" "${2:-$URI}") == t ]]; }

log "== pg_bench $(date -u +%FT%TZ) N=$N seconds=$SECS $(git rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg)"
log "   PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), shared_buffers ${PG_SHARED_BUFFERS:-2GB}, $URI${BASE:+; base build $BASE in $BURI}"

# ---- preload (not durable: synchronous_commit off for this instance only) ----
have=$(stored)
if [[ -n ${IMPORT:-} ]] && ((have == 0)); then
  t0=$(date +%s.%N)
  head -n "$N" "$IMPORT" | /usr/bin/time -f "pg-import: wall %e s, cpu %U+%S s, max RSS %M kB" \
    "${NEARDUP_BIN:-./build/neardup}" pg-import --store "$URI" --namespace "$NS" -i - 2>&1 | grep -v "decided" | tee -a "$OUT"
  t1=$(date +%s.%N)
  log "import: $N lines of $IMPORT in $(printf %.0f "$(echo "$t1 - $t0" | bc)") s ($(echo "$N / ($t1 - $t0)" | bc) lines/s)"
fi
if [[ -n ${IMPORT:-} ]]; then have=$(stored); N=$have; REAL=$have; fi
if ((have < REAL)); then
  serve 0 "$SERVE" "$URI?options=-c%20synchronous_commit%3Doff&pool_size=24"
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
  last=$(psqlq "SELECT coalesce(max(no), 0) FROM nd_${G}_docs")
  postings=""
  if has_anchor_table "$G"; then  # the anchor rows of the synthetic documents, with their source's n-gram count
    postings="CREATE TEMP TABLE srcn AS SELECT DISTINCT ON (s.extra) s.extra, p.shingles FROM src s
  JOIN nd_${G}_docs d ON d.extra = s.extra AND d.id NOT LIKE 'syn-%'
  JOIN nd_${G}_anchors p ON p.anchor = d.anchors[1] AND p.no = d.no;
INSERT INTO nd_${G}_anchors (anchor, shingles, ts, no)
SELECT a, s.shingles, d.ts, d.no FROM nd_${G}_docs d JOIN srcn s ON s.extra = d.extra CROSS JOIN unnest(d.anchors) a
 WHERE d.no > $last;"
  fi
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
$postings
EOF
  log "synthetic fill: $((N - have)) rows in $(printf %.0f "$(echo "$(date +%s.%N) - $t0" | bc)") s (SQL; random fingerprints and anchors, re-check bytes of the real rows)"
fi
log "stored: $(stored) documents in namespace $NS (tables nd_${G}_*)"

# ---- the base build's copy: its own namespace (its layout), the same documents ----
if [[ -n $BASE ]] && [[ $(stored "$BURI") -lt $(stored) ]]; then
  t0=$(date +%s.%N)
  psqlq "CREATE DATABASE base" >/dev/null 2>&1 || true
  serve 0 "$BASE" "$BURI"
  curl -sf -X PUT "127.0.0.1:${PORTS[0]}/v1/namespaces/$NS" -d '{}' >/dev/null
  stop_serves
  GB=$(gen "$BURI")
  for t in docs dups; do
    psqlq "SELECT format('CREATE TABLE IF NOT EXISTS %s PARTITION OF nd_${GB}_$t %s', replace(c.relname, 'nd_${G}_', 'nd_${GB}_'),
             pg_get_expr(c.relpartbound, c.oid)) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'nd_${G}_$t'::regclass" | while read -r ddl; do psqlq "$ddl" "$BURI"; done
  done
  cols="no, id, ts, fp, ch, hf, b0, b1, b2, b3, anchors, extra"
  psqlq "TRUNCATE nd_${GB}_docs" "$BURI"
  "$PGBIN/psql" "$URI" -Atq -c "\\copy (SELECT $cols FROM nd_${G}_docs) TO STDOUT" |
    "$PGBIN/psql" "$BURI" -q -c "SET synchronous_commit = off" -c "\\copy nd_${GB}_docs ($cols) FROM pstdin"
  psqlq "SELECT setval('nd_${GB}_no', (SELECT max(no) FROM nd_${GB}_docs))" "$BURI" >/dev/null
  log "base copy: $(stored "$BURI") documents into $BURI (nd_${GB}_*) in $(printf %.0f "$(echo "$(date +%s.%N) - $t0" | bc)") s"
fi
psqlq "VACUUM ANALYZE" >/dev/null
[[ -n $BASE ]] && psqlq "VACUUM ANALYZE" "$BURI" >/dev/null

# ---- bytes per document (every leaf of the namespace's docs and anchor tables) ----
leaves() {  # leaves <gen> <uri>: the namespace's leaf partitions
  local t="SELECT relid FROM pg_partition_tree('nd_$1_docs') WHERE isleaf"
  has_anchor_table "$1" "$2" && t="$t UNION ALL SELECT relid FROM pg_partition_tree('nd_$1_anchors') WHERE isleaf"
  echo "$t"
}
sizes() {  # sizes <label> <gen> <uri>
  local g=$2 u=$3 n bytes heap idx
  n=$(stored "$u")
  bytes=$(psqlq "SELECT sum(pg_total_relation_size(relid)) FROM ($(leaves "$g" "$u")) t" "$u")
  heap=$(psqlq "SELECT sum(pg_relation_size(relid)) FROM ($(leaves "$g" "$u")) t" "$u")
  idx=$(psqlq "SELECT sum(pg_indexes_size(relid)) FROM ($(leaves "$g" "$u")) t" "$u")
  log "$1 bytes per document: $((bytes / n)) total (heap $((heap / n)), indexes $((idx / n)), TOAST and the rest $(((bytes - heap - idx) / n))); pg_total_relation_size = $bytes for $n documents"
  psqlq "SELECT c.relname, sum(pg_relation_size(c.oid)) FROM pg_index i JOIN ($(leaves "$g" "$u")) t ON t.relid = i.indrelid
         JOIN pg_class c ON c.oid = i.indexrelid GROUP BY 1 ORDER BY 1 LIMIT 12" "$u" | while IFS='|' read -r name b; do
    log "   index $name: $((b / n)) B per document"
  done
  psqlq "SELECT c.relname, pg_relation_size(c.oid) FROM ($(leaves "$g" "$u")) t JOIN pg_class c ON c.oid = t.relid" "$u" |
    while IFS='|' read -r name b; do log "   heap $name: $((b / n)) B per document"; done
}
sizes "this build:" "$G" "$URI"
[[ -n $BASE ]] && sizes "base build:" "$(gen "$BURI")" "$BURI"

# ---- a warm cache, as a serving database has (the restart above emptied shared_buffers)
prewarm() {  # prewarm <gen> <uri>
  psqlq "CREATE EXTENSION IF NOT EXISTS pg_prewarm" "$2" >/dev/null
  psqlq "SELECT sum(pg_prewarm(relid)) FROM ($(leaves "$1" "$2")) t" "$2" >/dev/null
  psqlq "SELECT sum(pg_prewarm(indexrelid)) FROM pg_index i JOIN ($(leaves "$1" "$2")) t ON t.relid = i.indrelid" "$2" >/dev/null
}
prewarm "$G" "$URI"

# ---- lookup latency in the server (the engine's candidate query, generic plan) ----
layout() { psqlq "SELECT coalesce(record::jsonb->>'layout', '1') FROM neardup_namespaces WHERE name = '$NS'" "$1"; }
lookup_sql() {  # lookup_sql <gen> <layout>: the candidate query of that layout (pg_rule.h CandidatesStmt; before: one OR)
  local g=$1 t blocks=""
  echo '\set fp random(-4611686018427387903, 4611686018427387903) * 2 + random(0, 1)'
  if (($2 >= 3)); then
    for t in 0 1 2 3; do
      blocks="$blocks${blocks:+ UNION ALL }SELECT no FROM nd_${g}_docs WHERE b$t = ((:fp::bigint >> $((16 * t))) & 65535)::int AND ts >= 0 AND bit_count(int8send(fp # :fp::bigint)) <= 3"
    done
    echo "SELECT no, id, ts, fp, ch, hf, extra FROM nd_${g}_docs WHERE ts >= 0 AND (ch = :fp::bigint OR id = 'none' OR no = ANY('{}'::bigint[] || ARRAY($blocks))) ORDER BY no;"
  else
    echo "SELECT no, id, ts, fp, ch, hf, extra FROM nd_${g}_docs WHERE ts >= 0 AND (ch = :fp::bigint OR id = 'none' OR no = ANY('{}'::bigint[])
  OR ((b0 = (:fp::bigint & 65535)::int OR b1 = ((:fp::bigint >> 16) & 65535)::int OR b2 = ((:fp::bigint >> 32) & 65535)::int OR b3 = ((:fp::bigint >> 48) & 65535)::int)
      AND bit_count(int8send(fp # :fp::bigint)) <= 3)) ORDER BY no;"
  fi
}
lookups() {  # lookups <label> <gen> <uri>: one EXPLAIN, then pgbench at 1 and 2 clients
  local lay r c sql
  lay=$(layout "$3")
  lookup_sql "$2" "$lay" >"$DIR/lookup-$2.sql"
  sql=$(tail -n +2 "$DIR/lookup-$2.sql" | sed 's/:fp::bigint/$1::bigint/g; s/;$//')
  log "$1 layout $lay, EXPLAIN (ANALYZE, BUFFERS) of one lookup (generic plan):"
  "$PGBIN/psql" "$3" -Atq -c "SET plan_cache_mode = force_generic_plan" -c "PREPARE q AS $sql" \
    -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE q(1234567890123456789)" | grep -E "Scan|Heap Fetches|Buffers|Execution Time" | sed 's/^/   /' | tee -a "$OUT"
  for c in 1 2; do
    r=$(PGOPTIONS="-c plan_cache_mode=force_generic_plan" "$PGBIN/pgbench" -n -M prepared -c $c -j $c -T "$SECS" -f "$DIR/lookup-$2.sql" "$3" 2>&1)
    log "$1 lookup (pgbench -M prepared -c $c, $SECS s): $(echo "$r" | grep -E '^latency average|^tps' | tr '\n' ' ')"
  done
  if [[ -n ${OLD_QUERY:-} ]] && ((lay >= 3)); then  # the layout-2 query (one OR of the blocks) on the same tables
    lookup_sql "$2" 2 >"$DIR/lookup-$2-or.sql"
    r=$(PGOPTIONS="-c plan_cache_mode=force_generic_plan" "$PGBIN/pgbench" -n -M prepared -c 1 -j 1 -T "$SECS" -f "$DIR/lookup-$2-or.sql" "$3" 2>&1)
    log "$1 lookup with the layout-2 query (one OR, BitmapOr + heap) on these tables (pgbench -M prepared -c 1, $SECS s): $(echo "$r" | grep -E '^latency average|^tps' | tr '\n' ' ')"
  fi
}
lrounds=1
[[ -n $BASE ]] && lrounds=$ROUNDS
[[ -n ${LOOKUP_ROUNDS:-} ]] && lrounds=$LOOKUP_ROUNDS
for ((r = 1; r <= lrounds; r++)); do
  if [[ -n $BASE ]]; then
    prewarm "$(gen "$BURI")" "$BURI"
    lookups "[round $r, base]" "$(gen "$BURI")" "$BURI"
    prewarm "$G" "$URI"
  fi
  lookups "${BASE:+[round $r, this build]}" "$G" "$URI"
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
phases() {  # phases <label> <binary> <uri>: 1 connection, 16 connections, 2 instances x 8
  serve 0 "$2" "$3"
  phase "${1:+$1 }1 instance, 1 connection" "${PORTS[0]}" 1
  phase "${1:+$1 }1 instance, 16 connections" "${PORTS[0]}" 16
  serve 1 "$2" "$3"
  phase "${1:+$1 }2 instances, 8 connections each" "${PORTS[0]}" 8 "${PORTS[1]}" 8
  stop_serves
}
rounds=1
[[ -n $BASE ]] && rounds=$ROUNDS
[[ ${PHASES:-1} == 0 ]] && rounds=0
for ((r = 1; r <= rounds; r++)); do
  if [[ -n $BASE ]]; then
    prewarm "$(gen "$BURI")" "$BURI"
    phases "[round $r, base]" "$BASE" "$BURI"
    prewarm "$G" "$URI"
  fi
  phases "${BASE:+[round $r, this build]}" "$SERVE" "$URI"
done
# ---- where a check's time goes: every statement logged with its duration, 1 connection ----
profile() {  # profile <label> <binary> <uri> <database>
  local since
  psqlq "ALTER DATABASE $4 SET log_min_duration_statement = 0" >/dev/null
  since=$(date -u '+%F %T')
  serve 0 "$2" "$3"
  "$LOAD" --port "${PORTS[0]}" --ns "$NS" --threads 1 --seconds "$SECS" --dup-rate 0.2 --pregen-mb 5 >"$DIR/profile.json" 2>/dev/null
  stop_serves
  psqlq "ALTER DATABASE $4 RESET log_min_duration_statement" >/dev/null
  log "$1 server time per statement (1 connection, $SECS s: $(cat "$DIR/profile.json")):"
  bench/pg_statement_times.py "$DIR/pg/log" --since "$since" | tee -a "$OUT"
}
if [[ -n ${PROFILE:-} ]]; then
  [[ -n $BASE ]] && profile "base build:" "$BASE" "$BURI" base
  profile "this build:" "$SERVE" "$URI" postgres
fi
log "stored after: $(stored)${BASE:+ / base $(stored "$BURI")}; load $(cut -d' ' -f1-3 /proc/loadavg)"
