#!/bin/sh
# Static analysis: clang-tidy's Clang Static Analyzer checks over src/, two
# files at a time. Any finding fails the run. Left out, with the reason:
#   security.insecureAPI.DeprecatedOrUnsafeBufferHandling: flags every
#     memcpy/snprintf (C11 Annex K advice); scripts/banned.sh bans the unsafe
#     calls instead.
#   valist.Uninitialized: a false positive of clang-tidy 14 on glibc's
#     va_start in every variadic function (err_set, log_*, xasprintf).
set -u
checks='-*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling,-clang-analyzer-valist.Uninitialized'
flags="-std=c17 -D_GNU_SOURCE -Isrc $(pkg-config --cflags libmicrohttpd jansson sqlite3 libpq libssl libpsl 2>/dev/null)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086
find src -name '*.c' | sort | xargs -P 2 -n 8 sh -c \
    "clang-tidy --quiet --checks='$checks' \"\$@\" -- $flags 2>/dev/null" sh >"$out"
n=$(grep -c 'warning:\|error:' "$out")
if [ "$n" -ne 0 ]; then
    grep -A3 'warning:\|error:' "$out"
    echo "analyze: $n finding(s) from clang-tidy (fix them, or say in scripts/analyze.sh why a check is off)"
    exit 1
fi
echo "analyze: clang-tidy found nothing in src/"
