#!/usr/bin/env bash
# A checked run of the Redis Cluster store under faults (issue 16): a real cluster (3 masters +
# 3 replicas, scripts/redis_cluster.sh), two `neardup-serve` instances over it, the recorder
# (scripts/history/record.py) sending concurrent near-duplicates to both, this script injecting
# faults meanwhile, then the offline checker (scripts/history/check.py) over the history.
#
#   scripts/history/run_faults.sh [--trials N] [--faults LIST] [--fault-every S] [--out DIR]
#                                     [--mode concurrent|sequential] [--max-seconds S] [-- RECORD_ARGS]
# RECORD_ARGS go to record.py as they are (e.g. -- --min-group 41 --max-group 41).
# --store embedded: the same run against one instance over the embedded store (the reference;
# only kill-instance and stop-instance apply there, other faults are logged as skipped).
# --store postgres: two instances over a private PostgreSQL 15 (scripts/postgres.sh, port
# 15432..15499); kill-instance, stop-instance and restart-db (an immediate shutdown of the
# server, as a crash, then a start that recovers from the WAL) apply.
#
# LIST: comma-separated, used in turn: kill-master, kill-instance, stop-instance (SIGSTOP 3 s, then
# SIGCONT), partition (one instance cut off from one master and its replica for 5 s: nftables
# drops that instance's packets, by uid, on loopback), migrate (100 slots moved between masters
# under load), restart-db (--store postgres), none. A fault that cannot be injected here (no nft, not root) is logged and skipped.
# Only 127.0.0.1 (Redis on HISTORY_BASEPORT..+5, default 21400: cluster bus ports, +10000, stay
# below the ephemeral range; serve on +100, +101); every process is stopped by its pid; every
# wait is bounded.
# Exit: the checker's (0 valid, 1 violations, 2 unusable history), 3 when set-up failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
trials=200 faults=none every=4 out="" mode=concurrent max_seconds=600 base=${HISTORY_BASEPORT:-21400} kind=cluster
while (($#)); do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --fault-every) every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --max-seconds) max_seconds=$2; shift 2 ;;
    --store) kind=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
serve=${NEARDUP_SERVE:-build/neardup-serve}
[[ -x $serve ]] || { echo "no $serve: build first (scripts/build.sh)" >&2; exit 3; }
work=$(mktemp -d /tmp/neardup-history.XXXXXX)
chmod 755 "$work"  # the postgres store's server runs as the postgres user (scripts/postgres.sh)
out=${out:-$work}
mkdir -p "$out"
flog=$out/faults.jsonl
: >"$flog"
# One nft table per base port: a concurrent run on another base (another checkout's
# scripts/test.sh) never deletes this run's partition.
nft_table=neardup_partition_$base
seeds=$(for i in 0 1 2 3 4 5; do printf '127.0.0.1:%d,' $((base + i)); done)
store="redis-cluster://${seeds%,}"
ports=($((base + 100)) $((base + 101)))
# Instance 1 runs as `nobody` so a partition can drop exactly its packets (nft meta skuid).
as_user=(env)
id nobody >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

log_fault() { printf '{"wall": %s, "what": "%s"}\n' "$(date +%s.%N)" "$1" >>"$flog"; echo "fault: $1" >&2; }

start_instance() {
  local i=$1 cmd=("$serve")
  [[ $i == 1 ]] && cmd=("${as_user[@]}" "$serve")
  local where=(--store "$store")
  [[ $kind == embedded ]] && where=(--data "$work/db" --init)
  "${cmd[@]}" "${where[@]}" --listen "127.0.0.1:${ports[$i]}" >>"$work/serve$i.log" 2>&1 &
  echo $! >"$work/serve$i.pid"
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:${ports[$i]}/healthz" >/dev/null && return 0
    sleep 0.1
  done
  echo "instance $i did not start (log: $work/serve$i.log)" >&2
  return 1
}

stop_all() {
  nft delete table inet "$nft_table" 2>/dev/null || true
  for i in 0 1; do
    [[ -f $work/serve$i.pid ]] && kill -CONT "$(cat "$work/serve$i.pid")" 2>/dev/null || true
    [[ -f $work/serve$i.pid ]] && kill "$(cat "$work/serve$i.pid")" 2>/dev/null || true
  done
  [[ $kind == cluster ]] && scripts/redis_cluster.sh stop "$work/redis" "$base" >/dev/null 2>&1
  [[ $kind == postgres ]] && scripts/postgres.sh stop "$work/pg" >/dev/null 2>&1
  return 0
}
trap stop_all EXIT

cluster_ok() { [[ $(redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep cluster_state) == cluster_state:ok ]]; }
masters() { redis-cli -p "$1" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ {split($2, a, "[:@]"); print a[2], $1}'; }
any_live_port() { for i in 0 1 2 3 4 5; do redis-cli -p $((base + i)) ping >/dev/null 2>&1 && { echo $((base + i)); return; }; done; }

fault_kill_master() {
  local p victim
  [[ $kind == cluster ]] || { log_fault "kill-master skipped (embedded)"; return; }
  p=$(any_live_port)
  victim=$(masters "$p" | shuf -n1 | cut -d' ' -f1)
  log_fault "kill -9 master $victim"
  kill -9 "$(cat "$work/redis/$victim/redis.pid")"
  p=$(any_live_port)
  # Recovered: a replica took the victim's slots (it is no longer a live master) and the
  # cluster says ok again. Bounded: 30 s.
  local t
  for t in $(seq 300); do
    cluster_ok "$p" && ! masters "$p" | grep -q "^$victim " && [[ $(masters "$p" | grep -c .) == 3 ]] && break
    sleep 0.1
  done
  ((t < 300)) && log_fault "cluster ok after failover of $victim" || log_fault "no failover of $victim within 30 s"
  scripts/redis_cluster.sh start-node "$work/redis" "$base" "$victim" >/dev/null
}

fault_kill_instance() {
  local i=$((RANDOM % ninst))
  log_fault "kill -9 instance $i"
  kill -9 "$(cat "$work/serve$i.pid")"
  sleep 1
  start_instance "$i"
  log_fault "instance $i restarted"
}

fault_stop_instance() {
  local i=$((RANDOM % ninst))
  log_fault "SIGSTOP instance $i"
  kill -STOP "$(cat "$work/serve$i.pid")"
  sleep 3
  kill -CONT "$(cat "$work/serve$i.pid")"
  log_fault "SIGCONT instance $i"
}

fault_partition() {
  [[ $kind == cluster ]] || { log_fault "partition skipped (embedded)"; return; }
  [[ ${as_user[0]} == setpriv ]] && command -v nft >/dev/null || { log_fault "partition skipped (needs root and nft)"; return; }
  local p victim replica
  p=$(any_live_port)
  read -r victim vid < <(masters "$p" | shuf -n1)
  replica=$(redis-cli -p "$p" cluster nodes | awk -v m="$vid" '$4 == m {split($2, a, "[:@]"); print a[2]}' | head -1)
  log_fault "partition instance 1 from $victim ${replica:-}"
  nft add table inet "$nft_table"
  nft add chain inet "$nft_table" out '{ type filter hook output priority 0; }'
  nft add rule inet "$nft_table" out meta skuid nobody tcp dport "{ $victim${replica:+, $replica} }" drop
  sleep 5
  nft delete table inet "$nft_table"
  log_fault "partition healed"
}

fault_restart_db() {
  [[ $kind == postgres ]] || { log_fault "restart-db skipped ($kind)"; return; }
  log_fault "crash postgres (immediate shutdown)"
  scripts/postgres.sh kill "$work/pg" >/dev/null
  sleep 0.5
  scripts/postgres.sh start "$work/pg" >/dev/null || { log_fault "postgres did not restart"; return; }
  log_fault "postgres restarted"
}

fault_migrate() {
  local p from to
  [[ $kind == cluster ]] || { log_fault "migrate skipped (embedded)"; return; }
  p=$(any_live_port)
  mapfile -t ids < <(masters "$p" | shuf -n2 | cut -d' ' -f2)
  ((${#ids[@]} == 2)) || { log_fault "migrate skipped (fewer than 2 masters)"; return; }
  log_fault "migrate 100 slots ${ids[0]:0:8} -> ${ids[1]:0:8}"
  timeout 60 redis-cli --cluster reshard "127.0.0.1:$p" --cluster-from "${ids[0]}" --cluster-to "${ids[1]}" \
    --cluster-slots 100 --cluster-yes >>"$work/migrate.log" 2>&1 || log_fault "migrate failed (migrate.log)"
  log_fault "migrate done"
}

ninst=2 urls=()
[[ $kind == embedded ]] && ninst=1
[[ $kind == cluster ]] && { scripts/redis_cluster.sh start "$work/redis" "$base" >/dev/null || exit 3; }
if [[ $kind == postgres ]]; then
  store=$(scripts/postgres.sh start "$work/pg") || exit 3
fi
for ((i = 0; i < ninst; i++)); do
  start_instance "$i" || exit 3
  urls+=(--url "http://127.0.0.1:${ports[$i]}")
done
scripts/history/record.py "${urls[@]}" \
  --out "$out/history.jsonl" --faults "$flog" --mode "$mode" --trials "$trials" \
  --max-seconds "$max_seconds" --prefix "r$$-" \
  --corpus data/natural/dev/zh-short.jsonl --corpus data/natural/dev/en-long.jsonl \
  --corpus data/natural/dev/en-short.jsonl --corpus data/natural/dev/zh-long.jsonl "$@" &
rec=$!
IFS=, read -ra kinds <<<"$faults"
n=0
while kill -0 "$rec" 2>/dev/null; do
  sleep "$every"
  kill -0 "$rec" 2>/dev/null || break
  fault=${kinds[$((n % ${#kinds[@]}))]}
  n=$((n + 1))
  [[ $fault == none ]] || "fault_${fault//-/_}"
done
wait "$rec" || { echo "recorder failed" >&2; exit 3; }
rc=0
scripts/history/check.py "$out/history.jsonl" --json "$out/check.json" || rc=$?
echo "history: $out/history.jsonl  check: $out/check.json  logs: $work"
exit $rc
