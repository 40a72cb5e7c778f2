#!/usr/bin/env bash
# Prints, loudly, the tests that skipped themselves because something they need is missing
# (internal/testing/testenv appends them to the file $1). Prints nothing when none did.
f=${1:?skip log}
[ -s "$f" ] || exit 0
n=$(sort -u "$f" | wc -l)
echo
echo "================================================================================"
echo "  $n test(s) SKIPPED: prerequisites missing on this machine (they proved nothing)"
echo "================================================================================"
sort -u "$f" | sed 's/^/  /'
echo "  Install them with: make deps (as root)"
echo "================================================================================"
