#!/usr/bin/env bash
# The README's second command: set up, build, and run the whole test suite (all labels except
# bench), then a few seconds of each libFuzzer target. Exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
start=$(date +%s)
"$here/setup.sh"
default_preset=release
[ "${CI:-}" = true ] && default_preset=ci
preset="${SIGHTLINE_PRESET:-$default_preset}"
"$here/build.sh" "$preset"
echo "[test] built in $(( $(date +%s) - start )) s; running ctest ($preset)"
ctest --preset "$preset" -j "$SIGHTLINE_JOBS"

# Fuzz targets: a separate clang build of the parsers only; each runs for a few seconds here.
# Long runs: see the README (scripts/fuzz.sh TARGET SECONDS).
if [ "${SIGHTLINE_SKIP_FUZZ:-0}" != 1 ] && grep -q '^sightline_add_fuzz(' "$SIGHTLINE_ROOT/tests/fuzz/CMakeLists.txt"; then
  "$here/build.sh" fuzz
  ctest --preset fuzz -j "$SIGHTLINE_JOBS"
fi
echo "[test] all passed in $(( $(date +%s) - start )) s"
