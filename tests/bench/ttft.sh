#!/usr/bin/env bash
# Time to the first answer token (issue #6's benchmark): cached vs uncached, MSA vs dense, on a
# library of R-intro.pdf + R-exts.pdf (276K tokens in full) cut to MAX_TOKENS (default 100000) by
# the budget planner. Uses the CLI as a user does; every `ask` prints "first answer text after X s".
#   cached:   `prefill --max-tokens MAX` once (its wall time is printed), then `ask` restores the
#             saved library context (MSA; and dense: the same saved K/V attended densely);
#   uncached: `ask --no-library-prefill --no-cache --ctx MAX+1024`, which prefills a context of the
#             same size for the question, MSA and (UNCACHED_DENSE=1) dense. Dense at 100K is
#             quadratic: hours on two cores, so it is off by default.
# The library prefill resumes when rerun: use a fresh LIB for a clean prefill time.
#   MAX_TOKENS=8192 UNCACHED_DENSE=1 tests/bench/ttft.sh [BUILD_DIR] [LIB]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build/release}"
max="${MAX_TOKENS:-100000}"
lib="${2:-$root/build/ttft/library-$max}"
cli="$build/app/sightline-cli"
samples="${SIGHTLINE_CACHE:-$HOME/.cache/sightline}/samples/pdf"
q="Which function reads a data frame from a file?"
"$cli" add --library "$lib" "$samples/R-intro.pdf" "$samples/R-exts.pdf" | tail -2
start=$(date +%s.%N)
"$cli" prefill --library "$lib" --max-tokens "$max" --save-every 4096 2>/dev/null | tail -1
end=$(date +%s.%N)
echo "library prefill wall: $(echo "$end - $start" | bc) s"
ask() { "$cli" ask --library "$lib" --effort low --no-semantic "$@" | grep -E "^Read:|first answer text"; }
echo "== cached, MSA";   ask "$q"
echo "== cached, dense"; ask --attention dense "$q"
echo "== uncached, MSA"; ask --no-library-prefill --no-cache --ctx $((max + 1024)) "$q"
if [ "${UNCACHED_DENSE:-0}" = 1 ]; then
  echo "== uncached, dense"; ask --no-library-prefill --no-cache --attention dense --ctx $((max + 1024)) "$q"
fi
