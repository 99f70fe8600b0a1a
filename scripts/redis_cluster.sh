#!/usr/bin/env bash
# A local Redis Cluster for tests and the README demo: 3 masters + 3 replicas
# on 127.0.0.1, ports BASEPORT..BASEPORT+5 (cluster bus on port+10000).
#
#   scripts/redis_cluster.sh start DIR BASEPORT   # prints the seed list, exits 0 once cluster_state:ok
#   scripts/redis_cluster.sh stop  DIR BASEPORT   # SIGTERM by pid, then SIGKILL the ones still alive
#   scripts/redis_cluster.sh start-node DIR BASEPORT PORT   # restart one node (after kill -9) from its
#                                                 # nodes.conf + AOF: it rejoins, as a replica if it was failed over
#
# Each node: cluster-enabled, appendonly (everysec), no RDB snapshots, node
# timeout 2000 ms (failover in ~4 s), min-replicas-to-write 1 (a master that
# lost its replica refuses writes instead of acknowledging writes a failover
# could lose), small maxmemory so a runaway test cannot eat the machine.
# Every wait is bounded; on failure the nodes already started are stopped.
# Only processes whose pid is in DIR/<port>/redis.pid are ever signalled.
#
# Env: REDIS_SERVER, REDIS_CLI (default: from PATH); REDIS_CLUSTER_MAXMEMORY (default 256mb).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR BASEPORT | start-node DIR BASEPORT PORT" >&2; exit 2; }
[[ $# -eq 3 || ( $# -eq 4 && $1 == start-node ) ]] || usage
cmd=$1 dir=$2 base=$3 node_port=${4:-}
[[ $base =~ ^[0-9]+$ ]] && (( base >= 1024 && base + 5 + 10000 <= 65535 )) || { echo "bad BASEPORT $base" >&2; exit 2; }
server=${REDIS_SERVER:-redis-server}
cli=${REDIS_CLI:-redis-cli}
maxmem=${REDIS_CLUSTER_MAXMEMORY:-256mb}
ports=()
for i in 0 1 2 3 4 5; do ports+=($((base + i))); done

# Polls "$@" every 0.1 s until it succeeds or $1 seconds pass.
wait_for() {
  local secs=$1; shift
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 0.1
  done
}

# True while pid runs (a zombie left for a non-reaping parent counts as dead).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

stop_nodes() {
  local pids=() p pid
  for p in "${ports[@]}"; do
    [[ -f $dir/$p/redis.pid ]] || continue
    pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    # Only a redis-server we started: the pid file may be stale after a crash
    # (redis-server retitles itself "redis-server 127.0.0.1:PORT [cluster]").
    if alive "$pid" && tr '\0' ' ' </proc/$pid/cmdline | grep -q -- "^redis-server 127.0.0.1:$p "; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  local deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.05; done
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  for pid in "${pids[@]}"; do
    local n=0
    while alive "$pid" && (( n++ < 50 )); do sleep 0.05; done
  done
}

node_ok() { [[ $("$cli" -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep cluster_state) == "cluster_state:ok" ]]; }

# Every replica connected to its master (needed before a failover test).
replica_synced() {
  local info
  info=$("$cli" -h 127.0.0.1 -p "$1" info replication 2>/dev/null | tr -d '\r')
  grep -q '^role:master' <<<"$info" && return 0
  grep -q '^master_link_status:up' <<<"$info"
}

launch_node() {
  local p=$1
  "$server" --port "$p" --bind 127.0.0.1 --dir "$dir/$p" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --appendonly yes --appendfsync everysec --save "" \
      --min-replicas-to-write 1 --min-replicas-max-lag 10 --repl-diskless-sync-delay 0 \
      --maxmemory "$maxmem" --maxmemory-policy noeviction \
      --daemonize yes --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log" >/dev/null
}

start_nodes() {
  mkdir -p "$dir"
  local p
  for p in "${ports[@]}"; do
    if "$cli" -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
      echo "port $p is already in use" >&2
      return 1
    fi
    rm -rf "${dir:?}/$p"
    mkdir -p "$dir/$p"
    launch_node "$p"
  done
  for p in "${ports[@]}"; do
    wait_for 10 "$cli" -h 127.0.0.1 -p "$p" ping || { echo "node $p did not start" >&2; return 1; }
  done
  # min-replicas-to-write would refuse the slot assignment writes before the
  # replicas exist; it is set again once they are synced.
  for p in "${ports[@]}"; do "$cli" -h 127.0.0.1 -p "$p" config set min-replicas-to-write 0 >/dev/null; done
  local seeds=()
  for p in "${ports[@]}"; do seeds+=("127.0.0.1:$p"); done
  timeout 30 "$cli" --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { echo "cluster create failed (see $dir/create.log)" >&2; return 1; }
  for p in "${ports[@]}"; do
    wait_for 20 node_ok "$p" || { echo "node $p never reported cluster_state:ok" >&2; return 1; }
  done
  for p in "${ports[@]}"; do
    wait_for 20 replica_synced "$p" || { echo "replica $p never synced" >&2; return 1; }
  done
  for p in "${ports[@]}"; do "$cli" -h 127.0.0.1 -p "$p" config set min-replicas-to-write 1 >/dev/null; done
}

case $cmd in
  start)
    if ! start_nodes; then
      stop_nodes
      exit 1
    fi
    (IFS=,; echo "redis-cluster://${ports[*]/#/127.0.0.1:}")
    ;;
  stop) stop_nodes ;;
  start-node)
    [[ " ${ports[*]} " == *" $node_port "* && -f $dir/$node_port/nodes.conf ]] || { echo "no node $node_port in $dir" >&2; exit 2; }
    launch_node "$node_port"
    wait_for 10 "$cli" -h 127.0.0.1 -p "$node_port" ping || { echo "node $node_port did not start" >&2; exit 1; }
    ;;
  status)
    for p in "${ports[@]}"; do
      printf '%s ' "$p"; node_ok "$p" && echo ok || echo down
    done
    ;;
  *) usage ;;
esac
