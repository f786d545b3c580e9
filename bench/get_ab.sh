#!/bin/sh
# Two (or more) builds of browserd on make bench's pinned authenticated GET,
# run alternately in one session: each round starts every binary in turn
# with the defaults a user gets (access log on, default threads), pinned to
# core 0 with wrk on core 1, as bench/run.sh's pinned(). Prints each run,
# then per binary the median requests/s, p99 and server CPU per request,
# and each binary's median ratio to the first one's in the same rounds. On
# a busy host the CPU per request is the steadier figure.
#
#   bench/get_ab.sh [-r ROUNDS] [-d SECONDS] [-s SPARES] OLD_BIN NEW_BIN...
#
# Issue 39.3: this is how a regression between two commits is told from a
# busy host (build the old commit in a worktree of its own).
set -eu
rounds=5 dur=5 spares=0
while getopts r:d:s: o; do
    case $o in
    r) rounds=$OPTARG ;;
    d) dur=$OPTARG ;;
    s) spares=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { echo "usage: $0 [-r ROUNDS] [-d SECONDS] [-s SPARES] OLD_BIN NEW_BIN..." >&2; exit 2; }
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
unset BROWSERD_LOG_LEVEL BROWSERD_THREADS

# One run of binary $1: prints "rps p99_ms cpu_us_per_req".
run() {
    rm -rf "$tmp/data"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    taskset -c 0 "$1" serve --listen 127.0.0.1:"$port" --data "$tmp/data" --spares "$spares" \
        2>"$tmp/server.log" &
    pid=$!
    for i in $(seq 200); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && [ -f "$tmp/data/bootstrap-api-key" ] && break
        sleep 0.1
    done
    if [ "$spares" -gt 0 ]; then
        for i in $(seq 600); do
            [ "$(ls "$tmp"/data/sessions/*.spare 2>/dev/null | wc -l)" -ge "$spares" ] && break
            sleep 0.1
        done
    fi
    key=$(cat "$tmp/data/bootstrap-api-key")
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    taskset -c 1 wrk -t1 -c64 -d"${dur}s" --latency -H "Authorization: Bearer $key" \
        "http://127.0.0.1:$port/org/entitlements" >"$tmp/wrk.txt"
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    pid=""
    awk -v a="$t0" -v b="$t1" -v hz="$hz" -v d="$dur" '
        /Requests\/sec/ { rps = $2 }
        $1 == "99%" { p = $2; ms = p + 0; if (p ~ /us$/) ms /= 1000; else if (p ~ /[0-9]s$/) ms *= 1000 }
        END { printf "%s %.2f %.1f\n", rps, ms, 1e6 * (b - a) / hz / (rps * d) }' "$tmp/wrk.txt"
}

for r in $(seq "$rounds"); do
    n=0
    for bin in "$@"; do
        n=$((n + 1))
        echo "$r $n $(run "$bin") $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$tmp/runs"
    done
done
echo "# round binary req/s p99_ms cpu_us_per_req load1 (above); medians over $rounds rounds:"
n=0
for bin in "$@"; do
    n=$((n + 1))
    awk -v n="$n" -v bin="$bin" '
        function median(a, k,   i, j, t) {
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
        }
        { v[$1, $2, 3] = $3; v[$1, $2, 5] = $5; v[$1, $2, 4] = $4; if ($1 > R) R = $1 }
        END {
            for (f = 3; f <= 5; f++) {
                for (r = 1; r <= R; r++) { x[r] = v[r, n, f]; q[r] = v[r, n, f] / v[r, 1, f] }
                m[f] = median(x, R); rq[f] = median(q, R)
            }
            printf "%s: %.0f req/s, p99 %.2f ms, %.1f us CPU per request; median ratio to the first: req/s %.3f, CPU per request %.3f\n",
                bin, m[3], m[4], m[5], rq[3], rq[5]
        }' "$tmp/runs"
done
