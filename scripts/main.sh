#!/usr/bin/env bash
# The README's first command: set up, build, and run Sightline's main job on the bundled samples:
# add them to a library (build/quickstart/library), ask a question in one long context, print the
# answer with citations, and write the report (build/quickstart/sightline-report.{md,html,pdf}).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
"$here/setup.sh"
preset="${SIGHTLINE_PRESET:-release}"
"$here/build.sh" "$preset" sightline-cli sightline
out="$SIGHTLINE_ROOT/build/quickstart"
mkdir -p "$out"
exec "$SIGHTLINE_ROOT/build/$preset/app/sightline-cli" quickstart \
  --library "$out/library" --report "$out/sightline-report.md" "$@"
