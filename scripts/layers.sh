#!/bin/sh
# The layering check of `make lint` (docs/README.md draws the arrows):
#   core      includes nothing above it (core only);
#   domain    includes core only (pure rules: no I/O, no store, no runtime);
#   runtime, store, proxy, telemetry never include session, api or http;
#   session   (a session's life, struct app, the hook registry) includes
#             what is below it and cluster's node registry, never api or http;
#   cluster   (the forwarder of requests between nodes) works on http's
#             requests, so it may include http, never session or api;
#   http      includes core only;
#   api       starts no threads and mounts nothing: engines live below it.
# Each violation is printed as FILE:LINE: rule. Exits 1 if any.
#
# api files that still start threads are listed in API_THREADS_NOT_MOVED: the
# engines they hold move out of api/ with issue 32 step 3, and the list only
# shrinks (a new thread in api/, or one in a file not listed, fails).
set -u
cd "$(dirname "$0")/.."
API_THREADS_NOT_MOVED=""
bad=0

# $1: folder; $2: extended regex of the layers its includes may name; $3: rule.
allow() {
    out=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' src/"$1"/*.[ch] 2>/dev/null |
        grep -vE "#[[:space:]]*include[[:space:]]+\"($2)/")
    if [ -n "$out" ]; then
        echo "$out" | sed "s|\$|   <- $3|"
        bad=1
    fi
}

allow core 'core' 'core includes only core'
allow domain 'core|domain' 'domain includes only core (and itself)'
allow http 'core|http' 'http includes only core (and itself)'
for layer in runtime store proxy telemetry; do
    allow "$layer" 'core|domain|runtime|store|proxy|telemetry' "$layer includes neither session, api nor http"
done
allow session 'core|domain|runtime|store|proxy|telemetry|cluster|session' 'session includes neither api nor http'
allow cluster 'core|domain|runtime|store|proxy|telemetry|cluster|http' 'cluster never includes session or api'

# api: handlers only. A thread or a mount belongs to an engine below it.
for f in src/api/*.c; do
    hits=$(grep -nE '\bpthread_create[[:space:]]*\(|[^_a-z]mount[[:space:]]*\(|\bunshare[[:space:]]*\(' "$f")
    [ -n "$hits" ] || continue
    case " $API_THREADS_NOT_MOVED " in
    *" $f "*) continue ;;
    esac
    echo "$hits" | sed "s|^|$f:|; s|\$|   <- api starts no threads and mounts nothing|"
    bad=1
done

# No file circles: a module (x.c with x.h) never includes, through any chain
# of headers, a module that includes it. tsort (coreutils) names a loop.
loops=$(for f in $(find src -name '*.[ch]'); do
    m=${f#src/}
    m=${m%.?}
    sed -n 's|^#include "\([^"]*\)\.h".*|\1|p' "$f" | while read -r dep; do
        [ "$dep" = "$m" ] || echo "$m $dep"
    done
done | tsort 2>&1 >/dev/null)
if [ -n "$loops" ]; then
    echo "$loops" | sed 's|$|   <- the modules above include each other (a circle)|'
    bad=1
fi

if [ "$bad" -ne 0 ]; then
    echo "layers: the includes above cross a layer (scripts/layers.sh, docs/README.md)"
    exit 1
fi
