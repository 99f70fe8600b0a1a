#!/usr/bin/env bash
# A Dask distributed cluster on 127.0.0.1 for the staged run (docs/SCALING.md):
# one `dask scheduler` and N `dask worker` processes (Debian's
# python3-distributed; scripts/install_deps.sh test), each recorded by pid.
#   scripts/dask_cluster.sh start DIR [WORKERS] [PORT]   prints the scheduler address
#   scripts/dask_cluster.sh stop DIR                     stops exactly those pids
# PORT defaults to the first free one of 18800-18899, or of the range
# NEARDUP_DASK_PORTS=LOW-HIGH (a shared machine's share), worker i listening
# on PORT+1+i; WORKERS to 2, one thread each. Logs are DIR/*.log.
set -euo pipefail
cmd=${1:?usage: $0 start|stop DIR [WORKERS] [PORT]}
dir=${2:?usage: $0 start|stop DIR [WORKERS] [PORT]}
PY=/usr/bin/python3

stop() {
  local pids=() f
  for f in "$dir"/*.pid; do [[ -f "$f" ]] && pids+=("$(cat "$f")"); done
  ((${#pids[@]})) || return 0
  # Workers first, the scheduler last; SIGTERM, then SIGKILL after 10 s.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$dir"/*.pid
}

free_port() {  # the first port of the range with the next WORKERS ports free too
  "$PY" - "$1" "${NEARDUP_DASK_PORTS:-18800-18899}" <<'EOF'
import socket, sys
n = int(sys.argv[1])
low, high = map(int, sys.argv[2].split("-"))
for base in range(low, high + 1 - n):
    try:
        socks = []
        for p in range(base, base + n + 1):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        for s in socks: s.close()
        print(base); sys.exit(0)
    except OSError:
        for s in socks: s.close()
sys.exit(f"no free port in {low}-{high}")
EOF
}

case "$cmd" in
  start)
    workers=${3:-2}
    mkdir -p "$dir"
    port=${4:-$(free_port "$workers")}
    addr="tcp://127.0.0.1:$port"
    dask scheduler --host 127.0.0.1 --port "$port" --no-dashboard >"$dir/scheduler.log" 2>&1 &
    echo $! >"$dir/scheduler.pid"
    for i in $(seq 0 $((workers - 1))); do
      dask worker "$addr" --host 127.0.0.1 --worker-port $((port + 1 + i)) --nthreads 1 --no-nanny \
        --no-dashboard --death-timeout 60 --local-directory "$dir/worker$i" >"$dir/worker$i.log" 2>&1 &
      echo $! >"$dir/worker$i.pid"
    done
    # Bounded wait until every worker has registered with the scheduler.
    if ! "$PY" - "$addr" "$workers" <<'EOF'
import sys
from distributed import Client
with Client(sys.argv[1], timeout=30) as c:
    c.wait_for_workers(int(sys.argv[2]), timeout=30)
EOF
    then
      echo "dask_cluster: the cluster did not come up; logs in $dir" >&2
      stop
      exit 1
    fi
    echo "$addr"
    ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR [WORKERS] [PORT]" >&2; exit 2 ;;
esac
