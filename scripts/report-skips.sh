#!/usr/bin/env bash
# The end of `make test`: every SKIPPED line the run's tests wrote to
# $BPFJET_SKIP_LOG (Rust tests through bpfjet_testsupport::report_skip, the
# shell and Python tests by appending), so skips are read where the verdict
# is, not searched for in cargo's captured output.
set -euo pipefail
log=${1:-${BPFJET_SKIP_LOG:-target/test-skips.log}}
if [ ! -s "$log" ]; then
    echo "== make test: no test skipped anything =="
    exit 0
fi
n=$(wc -l < "$log")
echo "== make test: $n skip(s); each is a check that did NOT run here =="
# Identical lines (the same skip from several test threads) once, counted.
sort "$log" | uniq -c | sort -rn | sed 's/^ *\([0-9]*\) /  \1x /'
