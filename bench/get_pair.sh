#!/bin/sh
# Two builds of browserd on the authenticated GET at the same time: both
# servers pinned to core 0 (the defaults a user gets: access log on, default
# threads, --spares 0), each loaded by its own wrk on core 1 for the same
# seconds. Whatever else runs on the host slows both alike, so the ratio of
# their requests/s holds on a busy host where runs one after the other
# (bench/get_ab.sh) vary by a third. Run it twice with the binaries swapped.
#
#   bench/get_pair.sh A_BIN B_BIN [SECONDS]
#
# Prints "A req/s cpu_us=... B req/s cpu_us=... B/A=ratio load=..." (cpu_us:
# the server's CPU time per request).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 A_BIN B_BIN [SECONDS]" >&2; exit 2; }
dur=${3:-8}
unset BROWSERD_LOG_LEVEL BROWSERD_THREADS
tmp=$(mktemp -d)
pids=""
cleanup() { [ -n "$pids" ] && kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)

# Starts binary $1 on data folder $2 (its stdout to a file: a command
# substitution would wait for the server's end).
start() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$2.port"
    taskset -c 0 "$1" serve --listen 127.0.0.1:"$(cat "$2.port")" --data "$2" --spares 0 \
        >"$2.out" 2>"$2.log" &
    echo $! >"$2.pid"
}
start "$1" "$tmp/a"
start "$2" "$tmp/b"
pids="$(cat "$tmp/a.pid") $(cat "$tmp/b.pid")"
for s in a b; do
    for i in $(seq 200); do
        curl -s -o /dev/null "http://127.0.0.1:$(cat "$tmp/$s.port")/" &&
            [ -f "$tmp/$s/bootstrap-api-key" ] && break
        sleep 0.1
    done
done
ticks() { awk '{print $14+$15}' "/proc/$(cat "$tmp/$1.pid")/stat"; }
a0=$(ticks a)
b0=$(ticks b)
for s in a b; do
    taskset -c 1 wrk -t1 -c64 -d"${dur}s" -H "Authorization: Bearer $(cat "$tmp/$s/bootstrap-api-key")" \
        "http://127.0.0.1:$(cat "$tmp/$s.port")/org/entitlements" >"$tmp/$s.wrk" &
    echo $! >"$tmp/$s.wrkpid"
done
wait "$(cat "$tmp/a.wrkpid")" "$(cat "$tmp/b.wrkpid")"
a1=$(ticks a)
b1=$(ticks b)
ra=$(awk '/Requests\/sec/ {print $2}' "$tmp/a.wrk")
rb=$(awk '/Requests\/sec/ {print $2}' "$tmp/b.wrk")
awk -v ra="$ra" -v rb="$rb" -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" -v hz="$hz" -v d="$dur" \
    -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
        printf "A %s cpu_us=%.1f B %s cpu_us=%.1f B/A=%.3f load=%s\n", ra, 1e6 * (a1 - a0) / hz / (ra * d),
            rb, 1e6 * (b1 - b0) / hz / (rb * d), rb / ra, load }'
