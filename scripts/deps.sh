#!/bin/sh
# Installs the Debian packages browserd needs, and nothing when all are present.
set -eu
PKGS="pkg-config gcc make clang libclang-rt-14-dev clang-format libmicrohttpd-dev libjansson-dev libsqlite3-dev
libssl-dev libpsl-dev libwslay-dev libcmocka-dev publicsuffix wrk chromium chromium-driver xvfb
bubblewrap curl libarchive-dev ffmpeg libpq-dev libxcb1-dev libxcb-xtest0-dev libxcb-xfixes0-dev libxcb-shm0-dev
zlib1g-dev libseccomp-dev dpkg-dev libbpf-dev"
# libbpf-dev: loads the egress's in-kernel splice (bpf/egress_splice.bpf.c,
# built by clang above; docs/egress-proxy.md) and its bpf_helpers.h.
# dpkg-dev: dpkg-shlibdeps, which names the shared libraries of `make deb`'s
# Depends (dpkg-deb itself comes with dpkg).
# For `make test` only: a throwaway PostgreSQL server for the cluster suites,
# Firefox for the live view page's cross-browser test, and stress-ng for the
# lifecycle suites that run under a background load (issue 30), and
# prometheus for its promtool: tests/compat/37_metrics parses GET /metrics
# with a real Prometheus parser (`promtool check metrics`), not our own.
[ "${1:-}" = "--tests" ] && PKGS="$PKGS postgresql-15 firefox-esr stress-ng prometheus"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
command -v node >/dev/null 2>&1 || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
    echo "deps: installing$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# playwright.execute's runner packages (playwright-core, esbuild; pinned by
# runtime-js/package-lock.json), for `make run` and `make test` alike: the
# server binds runtime-js/ read-only into a session's sandbox (docs/process.md).
if [ ! -f runtime-js/node_modules/.package-lock.json ] ||
   [ runtime-js/package-lock.json -nt runtime-js/node_modules/.package-lock.json ]; then
    echo "deps: npm ci in runtime-js"
    (cd runtime-js && npm ci --no-audit --no-fund --loglevel=error)
fi

# The client-compatibility suite's npm packages (versions pinned by its lock
# file): for `make test` only (`deps.sh --tests`); `make run` does not need them.
[ "${1:-}" = "--tests" ] || exit 0
if [ ! -f tests/compat/node_modules/.package-lock.json ] ||
   [ tests/compat/package-lock.json -nt tests/compat/node_modules/.package-lock.json ]; then
    echo "deps: npm ci in tests/compat"
    (cd tests/compat && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
