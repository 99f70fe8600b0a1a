#!/usr/bin/env bash
# A private PostgreSQL 15 for tests, benchmarks and the docs' examples:
# initdb in DIR, listening only on 127.0.0.1, stopped by the pid it wrote.
#
#   scripts/postgres.sh start DIR [PORT]   # prints the store URI (postgresql://postgres@127.0.0.1:PORT/postgres)
#                                          # and writes it to DIR/uri; DIR/data is created by initdb when missing,
#                                          # else the server restarts on its existing data (a restart test)
#   scripts/postgres.sh stop DIR           # pg_ctl stop -m fast (bounded), then SIGKILL of that postmaster's pid
#   scripts/postgres.sh kill DIR           # immediate shutdown, as a crash (start again recovers from the WAL)
#   scripts/postgres.sh status DIR         # exit 0 while it runs
#
# PORT: default the first free port of 15432..15499 (PGPORT_RANGE="lo hi" to
# change). Runs the server as the `postgres` user when called as root.
# Durable settings (fsync and synchronous_commit on, as a user's database
# would run): an acknowledged check survives a crash of the server.
# Only the pid in DIR/postmaster.pid is ever signalled.
#
# Env: PGBIN (default /usr/lib/postgresql/15/bin), PG_SHARED_BUFFERS (default 256MB),
# PG_EXTRA_CONF (lines appended to postgresql.conf at initdb, e.g. a benchmark's settings).
set -euo pipefail

usage() { echo "usage: $0 start DIR [PORT] | stop DIR | kill DIR | status DIR" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 dir=$2 port=${3:-}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
read -r range_lo range_hi <<<"${PGPORT_RANGE:-15432 15499}"

as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# True while pid runs (a zombie counts as dead).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

postmaster_pid() {
  local pid
  pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && grep -q postgres "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  mkdir -p "$dir"
  chmod 755 "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
  if [[ -n $(postmaster_pid) ]]; then cat "$dir/uri"; return 0; fi
  if [[ -z $port && -f $dir/port ]]; then port=$(cat "$dir/port"); fi
  if [[ -z $port ]]; then
    for ((p = range_lo; p <= range_hi; p++)); do
      if port_free "$p"; then port=$p; break; fi
    done
    [[ -n $port ]] || { echo "no free port in $range_lo..$range_hi" >&2; exit 1; }
  fi
  if [[ ! -f $dir/data/PG_VERSION ]]; then
    as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_buffers = ${PG_SHARED_BUFFERS:-256MB}
max_connections = 200
max_locks_per_transaction = 128
jit = off
${PG_EXTRA_CONF:-}
EOF
  fi
  echo "$port" >"$dir/port"
  rm -f "$dir/data/postmaster.pid.stale"
  timeout 120 bash -c "$(declare -f as_pg); as_pg '$PGBIN/pg_ctl' -D '$dir/data' -l '$dir/log' -o '-p $port' -w -t 60 start" \
    >/dev/null || { tail -20 "$dir/log" >&2; exit 1; }
  local pid
  pid=$(postmaster_pid) || true
  [[ -n $pid ]] || { echo "postgres did not start" >&2; tail -20 "$dir/log" >&2; exit 1; }
  echo "$pid" >"$dir/postgres.pid"
  echo "postgresql://postgres@127.0.0.1:$port/postgres" | tee "$dir/uri"
}

stop() {
  local pid
  pid=$(postmaster_pid) || true
  [[ -n $pid ]] || return 0
  timeout 90 bash -c "$(declare -f as_pg); as_pg '$PGBIN/pg_ctl' -D '$dir/data' -m fast -t 60 stop" >/dev/null 2>&1 || true
  if alive "$pid"; then
    echo "postgres did not stop in time; killing postmaster $pid" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

case $cmd in
  start) start ;;
  stop) stop ;;
  kill)
    # An immediate shutdown: every process quits at once, no checkpoint, so
    # the next start recovers from the WAL as after a crash (a SIGKILL of the
    # postmaster alone would leave its backends running).
    [[ -n $(postmaster_pid) ]] &&
      timeout 60 bash -c "$(declare -f as_pg); as_pg '$PGBIN/pg_ctl' -D '$dir/data' -m immediate -t 30 stop" >/dev/null 2>&1
    true
    ;;
  status) [[ -n $(postmaster_pid) ]] ;;
  *) usage ;;
esac
