#!/bin/sh
# Authenticated GET /org/entitlements, the two configurations of issue 21's
# target, for before/after comparisons of the request path:
#   bench/auth.sh BIN [SECONDS]
# BENCH_LOG_LEVEL=info runs the server with its access log on (the default a
# user gets; warn, the default here, turns it off), written to a file.
# 1. one worker thread (BROWSERD_THREADS=1), wrk -t1 -c64;
# 2. the default thread count.
# The server is pinned to CPU 0 (taskset -c 0), wrk to CPU 1.
# Prints one line per configuration: requests/s, p50, p99 and server CPU per
# request (the server's user+system time over the requests served: the
# figure least disturbed by other load on the machine).
set -eu
BIN=$1
DUR=${2:-10}
LEVEL=${BENCH_LOG_LEVEL:-warn}
tmp=$(mktemp -d)
port=$((20000 + $$ % 20000))
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

run() { # label, BROWSERD_THREADS ("" = the default)
    label=$1
    rm -rf "$tmp/data"
    if [ -n "$2" ]; then export BROWSERD_THREADS=$2; else unset BROWSERD_THREADS; fi
    BROWSERD_LOG_LEVEL=$LEVEL taskset -c 0 "$BIN" serve --listen 127.0.0.1:$port --data "$tmp/data" \
        2>"$tmp/server.log" &
    pid=$!
    # Ready once it answers (a loaded machine may take seconds to start it).
    for _ in $(seq 200); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && [ -f "$tmp/data/bootstrap-api-key" ] && break
        sleep 0.1
    done
    key=$(cat "$tmp/data/bootstrap-api-key")
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    taskset -c 1 wrk -t1 -c64 -d${DUR}s --latency -H "Authorization: Bearer $key" \
        http://127.0.0.1:$port/org/entitlements >"$tmp/wrk.txt"
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
    hz=$(getconf CLK_TCK)
    rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.txt")
    p50=$(awk '$1=="50%" {print $2}' "$tmp/wrk.txt")
    p99=$(awk '$1=="99%" {print $2}' "$tmp/wrk.txt")
    us=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v r="$rps" -v d="$DUR" \
        'BEGIN {printf "%.1f", 1e6*(b-a)/hz/(r*d)}')
    printf '%-28s %10s req/s  p50 %8s  p99 %8s  %5s us CPU/request\n' "$label" "$rps" "$p50" \
        "$p99" "$us"
}

run "1 thread" 1
run "default threads, 1 core" ""
