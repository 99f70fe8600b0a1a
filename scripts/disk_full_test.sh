#!/usr/bin/env bash
# Disk full under load (issue 15): neardup-serve with --data on a small tmpfs,
# concurrent batch and single check-and-insert until writes answer 507, the
# filler freed, writes accepted again within 1 s, then SIGKILL and restart:
# every acknowledged document readable. scripts/disk_full_load.py does the work.
#   scripts/disk_full_test.sh [--long] [--build DIR] [extra disk_full_load.py flags]
# Default: 3 episodes (CI, well under a minute); --long: 25 episodes.
# Mounting needs a private mount namespace (unshare -m as root, or unshare -rm
# in a user namespace); where neither is allowed it prints SKIP and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
args=(--episodes 3)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --long) args=(--episodes 25 --tmpfs-mb 160); shift ;;
    --build) build=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
serve=$build/neardup-serve
if [[ ! -x "$serve" ]]; then
  echo "SKIP: $serve not built (the service needs librocksdb-dev)"; exit 0
fi
ns=()
if unshare -m --propagation private true 2>/dev/null; then
  ns=(unshare -m --propagation private)
elif unshare -rm --propagation private true 2>/dev/null; then
  ns=(unshare -rm --propagation private)
else
  echo "SKIP: disk-full test needs a private mount namespace (unshare -m / -rm), not allowed here"; exit 0
fi
exec "${ns[@]}" python3 scripts/disk_full_load.py --serve "$serve" "${args[@]}"
