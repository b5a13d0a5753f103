#!/usr/bin/env bash
# The README's first command: set up, build, and run Sightline's main job on the bundled samples.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
"$here/setup.sh"
preset="${SIGHTLINE_PRESET:-release}"
"$here/build.sh" "$preset" sightline-cli sightline
mkdir -p "$SIGHTLINE_ROOT/build/quickstart"
exec "$SIGHTLINE_ROOT/build/$preset/app/sightline-cli" quickstart \
  --report "$SIGHTLINE_ROOT/build/quickstart/sightline-report.md" "$@"
