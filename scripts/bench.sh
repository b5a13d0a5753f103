#!/usr/bin/env bash
# Builds the Google Benchmark executables in release mode and prints their tables.
#   scripts/bench.sh                 every benchmark
#   scripts/bench.sh bench_convert   one of them (extra args go to Google Benchmark)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
"$here/setup.sh" >/dev/null
"$here/build.sh" bench
dir="$SIGHTLINE_ROOT/build/bench/tests/bench"
if [ $# -gt 0 ]; then
  name="$1"; shift
  "$dir/$name" --benchmark_counters_tabular=true "$@"
else
  for b in "$dir"/bench_*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b" --benchmark_counters_tabular=true
  done
fi
