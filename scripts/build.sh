#!/usr/bin/env bash
# Configure (once) and build a preset: scripts/build.sh [PRESET] [ninja targets...]
# PRESET defaults to $SIGHTLINE_PRESET or `release`; CI=true selects `ci` (warnings as errors).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
default_preset=release
[ "${CI:-}" = true ] && default_preset=ci
preset="${1:-${SIGHTLINE_PRESET:-$default_preset}}"
shift || true
cd "$SIGHTLINE_ROOT"
if [ ! -f "build/$preset/build.ninja" ]; then
  cmake --preset "$preset" >/dev/null
fi
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" -j "$SIGHTLINE_JOBS" --target "$@"
else
  cmake --build --preset "$preset" -j "$SIGHTLINE_JOBS"
fi
