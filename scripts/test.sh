#!/bin/sh
# Runs every suite and ends with one line "N passed, N failed".
#   scripts/test.sh BUILD [ASAN_BUILD]   unit + black-box on each build
#   scripts/test.sh --unit-only BUILD    unit tests only
#   scripts/test.sh --fast BUILD         unit + the black-box suite (make check)
#   scripts/test.sh --analyze BUILD...   also the static analysis, beside them
#   scripts/test.sh --analyze --build-beside BUILD SAN_BUILD...
#                                        (make test) also makes the builds after
#                                        the first (make test-builds), beside
#                                        the first build's suites
set -u
unit_only=0
fast=0
analyze=0
build_beside=0
if [ "${1:-}" = "--unit-only" ]; then unit_only=1; shift; fi
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi
if [ "${1:-}" = "--analyze" ]; then analyze=1; shift; fi
if [ "${1:-}" = "--build-beside" ]; then build_beside=1; shift; fi
passed=0
failed=0
log=$(mktemp)
t0=$(date +%s)
fails=$(mktemp)
trap 'rm -f "$fails" "$log" "$log".[12] "$log".[12].rc "$log".bb "$log".bb.rc "$log".cl "$log".cl.rc "$log".mk "$log".mk.rc; rm -rf "$log".fz "$log".sdk "$log".sdk.rc "$log".an "$log".an.rc' EXIT

count() { # $1: label; reads the suite's output from $log
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\..*/\1/p' "$log" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
    if [ -z "$p$f" ]; then
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
        p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
        f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    fi
    p=${p:-0}
    f=${f:-0}
    if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed or exited non-zero
    passed=$((passed + p))
    failed=$((failed + f))
    # What failed, kept for the summary above the last line: the suite and
    # its failing tests' names (a CI excerpt shows the run's tail).
    if [ "$f" -ne 0 ]; then
        {
            echo "$1: $f failed"
            grep -E '^not ok - |^\[  FAILED  \] [^0-9]' "$log" | sed 's/^/    /' | sort -u | head -n 20
        } >>"$fails"
    fi
    now=$(date +%s)
    echo "== $1: $p passed, $f failed ($((now - t0)) s)"
    t0=$now
}

# The cluster scenarios of build $1 in the background (cluster_end waits
# for them and counts them).
cl_pid=""
cl_later=""
# The cluster scenarios of build $1. 46_busy_lifecycle (three lifecycle
# paths under stress-ng, about 65 s) runs on the plain build only: its value
# is the outcome on a busy host, and the server code it reaches (the pool
# engine's flush, the flow count) runs under ASan in test_pool, test_store
# and the other scenarios; beside the TSan build's unit tests it was the
# phase's long pole.
cluster_start() {
    cl_b=$1
    cl_t0=$(date +%s)
    case "$cl_b" in
    *asan* | *tsan*) cl_filter='^(?!46_busy_lifecycle:)' ;;
    *) cl_filter='' ;;
    esac
    (
        BROWSERD_BIN="$cl_b/browserd" TEST_DIR=tests/cluster node tests/blackbox/run.mjs "$cl_filter" >"$log.cl" 2>&1
        echo $? >"$log.cl.rc"
    ) &
    cl_pid=$!
}

cluster_end() {
    [ -n "$cl_pid" ] || return 0
    wait "$cl_pid"
    cl_pid=""
    cat "$log.cl"
    cp "$log.cl" "$log"
    t0=$cl_t0
    count "cluster ($cl_b)" "$(cat "$log.cl.rc" 2>/dev/null || echo 1)"
}

run_build() {
    b=$1
    # The black-box suite (no Chromium: one server per test, HTTP) runs
    # while the unit tests run: two streams of small programs on two cores.
    # Its output is printed after the units', its seconds counted from its
    # own start.
    if [ $unit_only -eq 0 ]; then
        bb_t0=$(date +%s)
        (
            BROWSERD_BIN="$b/browserd" node tests/blackbox/run.mjs >"$log.bb" 2>&1
            echo $? >"$log.bb.rc"
        ) &
        bb_pid=$!
        # The ASan build's cluster scenarios, put off until now (below): a
        # third stream beside the TSan build's unit tests and black-box suite.
        case "$b" in
        *tsan*) [ -n "$cl_later" ] && [ $fast -eq 0 ] && cluster_start "$cl_later" && cl_later="" ;;
        esac
    fi
    for t in "$b"/tests/test_*; do
        [ -x "$t" ] || continue
        "$t" >"$log" 2>&1
        rc=$?
        cat "$log"
        count "$t" $rc
    done
    [ $unit_only -eq 1 ] && return
    wait "$bb_pid"
    cat "$log.bb"
    cp "$log.bb" "$log"
    t0=$bb_t0
    count "black-box ($b)" "$(cat "$log.bb.rc" 2>/dev/null || echo 1)"
    [ $fast -eq 1 ] && return
    cluster_end
    # Which compat suites run on which build:
    # - plain: all, 20_sdk apart (below);
    # - ASan+UBSan: all but 20_sdk. Its value is the official client's wire
    #   format (@onkernel/sdk: paths, bodies, error classes, retries), which
    #   does not depend on the build; it runs on the plain build twice (one
    #   node, and a two-node cluster), and the server code it reaches is
    #   reached under ASan by the other suites (sessions, pools, fs, process,
    #   replays, computer, profiles, proxies). The hostile, fs, process,
    #   proxy and egress suites all still run under ASan. 05_readme_tour
    #   skips itself there (its clone is a plain build). 93_clients_mcp and
    #   93_clients_stagehand run on the plain build only, for the same
    #   reason: their value is third-party clients' habits (@playwright/mcp,
    #   Stagehand 4) over the CDP relay, and the relay's and discovery's
    #   code they reach is reached under ASan by 91_redteam_cdp,
    #   93_clients_discovery and 93_clients_cdp_libs (about 50 s of the
    #   run's 45-minute budget);
    # - ThreadSanitizer: the suites whose server code runs on many threads.
    case "$b" in
    *tsan*) filter='^(10_sessions|15_pools|40_egress|50_bidi|60_telemetry|70_sandbox|80_fs|81_process|82_extensions|83_replays|84_curl|85_computer_x|86_spares|87_hostile_slowcalls|89_hostile_caps|94_streamed_uploads|95_stream_upload|96_hostile_pauses):' ;;
    *asan*) filter='^(?!20_sdk:|93_clients_mcp:|93_clients_stagehand:)' ;;
    *) filter='^(?!20_sdk:)' ;;
    esac
    case "$b" in
    *tsan*) fuzz_start ;;
    esac
    BROWSERD_BIN="$b/browserd" TEST_DIR=tests/compat node tests/blackbox/run.mjs "$filter" >"$log" 2>&1
    rc=$?
    cat "$log"
    count "compat and sessions ($b)" $rc
    # The cluster scenarios (several nodes on one PostgreSQL, issue 22) on
    # the plain build run beside the SDK suite (below: a third stream, mostly
    # waiting on its nodes and PostgreSQL); the ASan build's beside the TSan
    # build's unit tests (above), or here when no TSan build follows.
    case "$b" in
    *tsan*) ;;
    *asan*) cl_later=$b ;;
    *) cluster_start "$b" ;;
    esac
    # On the plain build, the SDK suite on one node (its results are the
    # README's compat-results.json) and, at the same time, against a two-node
    # cluster (results kept apart): two independent servers, each suite one
    # stream of client calls, on two cores. Outputs are printed one after
    # the other, each suite's seconds counted from the shared start.
    case "$b" in
    *asan* | *tsan*) ;;
    *)
        sdk_t0=$(date +%s)
        (
            BROWSERD_TEST_CLUSTER=2 COMPAT_RESULTS="$b/compat-results-cluster.json" BROWSERD_BIN="$b/browserd" \
                TEST_DIR=tests/compat node tests/blackbox/run.mjs '^20_sdk:' >"$log.sdk" 2>&1
            echo $? >"$log.sdk.rc"
        ) &
        sdk_pid=$!
        BROWSERD_BIN="$b/browserd" TEST_DIR=tests/compat node tests/blackbox/run.mjs '^20_sdk:' >"$log" 2>&1
        rc=$?
        cat "$log"
        t0=$sdk_t0
        count "SDK on one node ($b)" $rc
        wait "$sdk_pid"
        cat "$log.sdk"
        cp "$log.sdk" "$log"
        t0=$sdk_t0
        count "SDK on a two-node cluster ($b)" "$(cat "$log.sdk.rc" 2>/dev/null || echo 1)"
        ;;
    esac
    cluster_end
    # A test run leaves no Chromium behind: no process whose command line
    # names a test server's folder (an unsandboxed browser), and none in a
    # session's cgroup (a sandboxed one sees only neutral paths, issue 29.16).
    # The crash watcher of a server killed at the end of a suite may still be
    # ending its sessions: wait (up to 15 s) for them to go.
    left=$(left_behind | wc -l)
    tries=0
    while [ "$left" -ne 0 ] && [ $tries -lt 30 ]; do
        sleep 0.5
        tries=$((tries + 1))
        left=$(left_behind | wc -l)
    done
    if [ "$left" -ne 0 ]; then
        echo "0 passed, 1 failed" >"$log"
        echo "== $left process(es) left behind by the suites:"
        left_behind | head -5 | while read -r pid; do ps -o pid=,args= -p "$pid" | cut -c1-160; done
        left_behind | xargs -r kill -9 2>/dev/null
        count "no Chromium left behind ($b)" 1
    fi
}

# The pids of processes the suites left: in a session cgroup (v1 pids or
# memory hierarchy, v2 unified) or naming a test server's sessions folder.
left_behind() {
    {
        pgrep -f 'browserd-bb-.*/sessions/'
        cat /sys/fs/cgroup/pids/browserd/*/cgroup.procs /sys/fs/cgroup/memory/browserd/*/cgroup.procs \
            /sys/fs/cgroup/browserd/*/cgroup.procs 2>/dev/null
    } | sort -u
}

# One fuzz target's smoke run: $1 the target, $2 its output file; the
# target's exit status is written to $2.rc.
fuzz_one() {
    n=$(basename "$1")
    mkdir -p build/fuzz/corpus/"$n"
    "$1" -max_total_time="${FUZZ_SMOKE_SECONDS:-3}" -timeout=10 build/fuzz/corpus/"$n" \
        "fuzz/corpus/$n" >"$2" 2>&1
    echo $? >"$2.rc"
}

# Beside the TSan build's compat suites (which spend most of their time
# waiting on browsers), the targets one at a time at the lowest priority:
# each runs for its FUZZ_SMOKE_SECONDS of wall time on the CPU the suites
# leave idle, and the smoke runs take no wall time of their own.
fz_pid=""
fuzz_start() {
    [ $unit_only -eq 1 ] || [ $fast -eq 1 ] && return
    mkdir -p "$log.fz"
    (
        # This subshell at nice 19 (its pid is the parent of the sh asked).
        renice -n 19 -p "$(sh -c 'echo $PPID')" >/dev/null
        for f in build/fuzz/bin/fuzz_*; do
            [ -x "$f" ] || continue
            fuzz_one "$f" "$log.fz/$(basename "$f")"
        done
    ) &
    fz_pid=$!
}

fuzz_end() {
    wait "$fz_pid"
    fz_pid=""
    for f in build/fuzz/bin/fuzz_*; do
        [ -x "$f" ] || continue
        o="$log.fz/$(basename "$f")"
        tail -n 2 "$o" 2>/dev/null
        if [ "$(cat "$o.rc" 2>/dev/null || echo 1)" -eq 0 ]; then
            echo "1 passed, 0 failed" >"$log"
        else
            echo "0 passed, 1 failed" >"$log"
        fi
        t0=$(date +%s)
        count "fuzz $(basename "$f") smoke (beside the TSan suites)" 0
    done
}

# The targets two at a time: each is one process on one core, and the run
# has two cores, so each still gets its FUZZ_SMOKE_SECONDS of a core as when
# they ran one by one, in half the wall time.
run_fuzz() {
    set -- build/fuzz/bin/fuzz_*
    while [ $# -gt 0 ]; do
        pair=""
        for f in "$@"; do
            shift
            [ -x "$f" ] || continue
            pair="$pair $f"
            [ "$(echo $pair | wc -w)" -eq 2 ] && break
        done
        i=0
        for f in $pair; do
            i=$((i + 1))
            fuzz_one "$f" "$log.$i" &
        done
        wait
        i=0
        for f in $pair; do
            i=$((i + 1))
            tail -n 2 "$log.$i"
            if [ "$(cat "$log.$i.rc")" -eq 0 ]; then
                echo "1 passed, 0 failed" >"$log"
            else
                echo "0 passed, 1 failed" >"$log"
            fi
            count "fuzz $(basename "$f") smoke" 0
        done
    done
}

# The static analysis (scripts/analyze.sh: clang-tidy, about ten minutes of
# CPU) runs beside the suites at the lowest priority: the suites spend much
# of their time waiting on browsers and deadlines, and a nice 19 process gets
# a core only when nothing else wants it, so it takes little from the tests
# and about five minutes off the run. Its result is counted before the fuzz
# smoke runs, which want both cores.
if [ $analyze -eq 1 ]; then
    an_t0=$(date +%s)
    (
        nice -n 19 sh scripts/analyze.sh >"$log.an" 2>&1
        echo $? >"$log.an.rc"
    ) &
    an_pid=$!
fi
# The sanitizer builds and the fuzz targets (make test-builds, about two
# minutes of wall time when they came first) are made beside the first
# build's suites, at the lowest priority like the static analysis; the next
# build's suites wait for them. A failed build fails the run, and its
# suites are not run.
mk_pid=""
if [ $build_beside -eq 1 ]; then
    (
        nice -n 19 env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory \
            -j"${JOBS:-2}" test-builds >"$log.mk" 2>&1
        echo $? >"$log.mk.rc"
    ) &
    mk_pid=$!
fi
first=1
for b in "$@"; do
    if [ $first -eq 0 ] && [ -n "$mk_pid" ]; then
        wait "$mk_pid"
        mk_pid=""
        cat "$log.mk"
        if [ "$(cat "$log.mk.rc" 2>/dev/null || echo 1)" -ne 0 ]; then
            echo "0 passed, 1 failed" >"$log"
            count "the sanitizer and fuzz builds (make test-builds, beside the first build's suites)" 1
            break
        fi
    fi
    first=0
    run_build "$b"
done
if [ -n "$cl_later" ]; then # an ASan build and no TSan build after it
    cluster_start "$cl_later"
    cluster_end
fi
if [ $analyze -eq 1 ]; then
    wait "$an_pid"
    cat "$log.an"
    if [ "$(cat "$log.an.rc" 2>/dev/null || echo 1)" -eq 0 ]; then
        echo "1 passed, 0 failed" >"$log"
    else
        echo "0 passed, 1 failed" >"$log"
    fi
    t0=$an_t0
    count "static analysis (clang-tidy, beside the suites)" 0
fi
if [ -n "$fz_pid" ]; then
    fuzz_end
else
    [ $unit_only -eq 1 ] || [ $fast -eq 1 ] || run_fuzz
fi
if [ -s "$fails" ]; then
    echo "== what failed:"
    cat "$fails"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
