#!/bin/sh
# A throwaway PostgreSQL server for tests: a fresh cluster in DIR, listening
# only on a Unix socket in DIR, with trust authentication for user browserd.
#
#   scripts/pgtmp.sh start DIR   prints ONE line on stdout: the store URL
#                                postgresql:///postgres?host=DIR&user=browserd
#   scripts/pgtmp.sh stop DIR    stops the server and removes DIR
#
# Works as root and as a normal user. initdb and postgres refuse to run as
# root, so under root DIR is handed to `nobody` and both run through setpriv;
# DIR's parents must then be searchable by nobody (/tmp is). DIR should be a
# short path: the socket DIR/.s.PGSQL.5432 must fit in 107 bytes.
# Diagnostics go to stderr; the server's log is DIR/log.
set -eu

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2

bindir=$(pg_config --bindir 2>/dev/null || true)
[ -x "$bindir/initdb" ] || bindir=/usr/lib/postgresql/15/bin
if [ ! -x "$bindir/initdb" ]; then
    echo "pgtmp: no initdb in \$(pg_config --bindir) or $bindir (install postgresql-15)" >&2
    exit 1
fi

# Runs a command as the server's owner: nobody under root, else ourselves.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
    else
        "$@"
    fi
}

case $cmd in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd -P)
    if [ -e "$dir/data" ]; then
        echo "pgtmp: $dir/data already exists" >&2
        exit 1
    fi
    if [ "$(id -u)" -eq 0 ]; then
        chown -R nobody:nogroup "$dir"
    fi
    if ! as_owner "$bindir/initdb" -D "$dir/data" -U browserd -A trust --no-locale --no-sync \
        >"$dir/initdb.log" 2>&1; then
        echo "pgtmp: initdb failed (is $dir reachable by $(as_owner id -un)?):" >&2
        cat "$dir/initdb.log" >&2
        exit 1
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
        -o "-k $dir -c listen_addresses='' -c fsync=off -c client_connection_check_interval=1s -c max_connections=200" \
        start >/dev/null 2>"$dir/pg_ctl.err"; then
        echo "pgtmp: the server did not start:" >&2
        cat "$dir/pg_ctl.err" "$dir/log" >&2 2>/dev/null || true
        exit 1
    fi
    echo "postgresql:///postgres?host=$dir&user=browserd"
    ;;
stop)
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd -P)
    if [ -f "$dir/data/postmaster.pid" ]; then
        if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop \
            >/dev/null 2>&1; then
            pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
            if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
                # Wait (up to 10 s) for the postmaster to be gone.
                i=0
                while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
                    sleep 0.1
                    i=$((i + 1))
                done
            fi
        fi
    fi
    rm -rf "$dir"
    ;;
*)
    usage
    ;;
esac
