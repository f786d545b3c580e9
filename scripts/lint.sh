#!/bin/sh
# Checks formatting against .clang-format without changing files.
set -u
files=$(find src tests/unit fuzz bench -name '*.[ch]' 2>/dev/null)
[ -n "$files" ] || exit 0
if ! clang-format --dry-run -Werror $files; then
    echo "lint: run 'make format' to apply .clang-format"
    exit 1
fi
