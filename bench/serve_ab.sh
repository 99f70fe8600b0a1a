#!/usr/bin/env bash
# A/B of server builds or flags on one preloaded store (bench/serve_bench.sh DATA_DIR=... makes one):
#   DATA_DIR=/path/to/store bench/serve_ab.sh LABEL BIN "EXTRA FLAGS" SECS CONNS...
# One start of BIN on DATA_DIR (sync=true), a 3 s warm-up, then one closed-loop phase per CONNS, each
# printed with the server CPU per request and documents per group commit. Appends to $OUT.
set -u
LABEL=$1; BIN=$2; FLAGS=$3; SECS=$4; shift 4
cd "$(dirname "$0")/.."
: "${DATA_DIR:?set DATA_DIR}"
$BIN serve --data "$DATA_DIR" --auto-create-namespaces true --listen 127.0.0.1:18181 --threads 64 --sync true $FLAGS > "${DATA_DIR}.serve.log" 2>&1 &
PID=$!
t0=$(date +%s)
for i in $(seq 1 3000); do grep -q "listening on" "${DATA_DIR}.serve.log" && break; sleep 0.2; done
echo "$LABEL start $(( $(date +%s) - t0 )) s" | tee -a "${OUT:-/tmp/serve_ab.log}"
./build/load_gen --port 18181 --ns load --threads 32 --seconds 3 >/dev/null 2>&1
for C in "$@"; do
  c0=$(awk '{print $14+$15}' /proc/$PID/stat)
  m0=$(curl -s 127.0.0.1:18181/metrics | awk '/^neardup_store_commit/ {printf "%s ", $2}')
  # RES, not OUT: OUT names the file the results are appended to.
  RES=$(./build/load_gen --port 18181 --ns load --threads $C --seconds $SECS 2>&1 | tail -1)
  c1=$(awk '{print $14+$15}' /proc/$PID/stat)
  m1=$(curl -s 127.0.0.1:18181/metrics | awk '/^neardup_store_commit/ {printf "%s ", $2}')
  python3 - "$LABEL" "$C" "$RES" "$c0" "$c1" "$m0" "$m1" <<'PY' | tee -a "${OUT:-/tmp/serve_ab.log}"
import json,sys
label,c,out,c0,c1,m0,m1=sys.argv[1:]
j=json.loads(out); m0=[float(x) for x in m0.split()]; m1=[float(x) for x in m1.split()]
req=max(j["requests"],1)
print("%s conns=%s rps=%.0f p50=%.2fms p99=%.2fms max=%.0fms err=%d cpu_us/req=%.1f docs/commit=%.1f" % (label,c,j["requests_per_s"],j["p50_us"]/1000,j["p99_us"]/1000,j["max_us"]/1000,j["errors"],(float(c1)-float(c0))*1e4/req,(m1[1]-m0[1])/max(1,m1[0]-m0[0])))
PY
done
kill -TERM $PID; wait $PID 2>/dev/null
