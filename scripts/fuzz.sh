#!/usr/bin/env bash
# Long libFuzzer run of one target: scripts/fuzz.sh TARGET [SECONDS] [extra libFuzzer flags]
# Corpus grows in build/fuzz/corpus/TARGET; crashes land in build/fuzz/artifacts/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
target="${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}"
secs="${2:-600}"
shift; shift || true
"$here/build.sh" fuzz "$target"
corpus="$SIGHTLINE_ROOT/build/fuzz/corpus/$target"
art="$SIGHTLINE_ROOT/build/fuzz/artifacts/"
mkdir -p "$corpus" "$art"
seeds="$SIGHTLINE_ROOT/tests/fuzz/corpus/$target"
exec "$SIGHTLINE_ROOT/build/fuzz/tests/fuzz/$target" -max_total_time="$secs" -artifact_prefix="$art" \
  -rss_limit_mb=2048 "$@" "$corpus" $( [ -d "$seeds" ] && echo "$seeds" )
