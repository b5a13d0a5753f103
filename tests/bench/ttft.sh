#!/usr/bin/env bash
# Time to the first answer token on a ~100K-token library, cached vs uncached, MSA vs dense
# (issue #6's benchmark). Uses the CLI as a user does:
#   1. add R-intro.pdf and R-exts.pdf to a library (276K tokens in full);
#   2. `prefill --max-tokens 100000`: the library context (99,402 tokens: pages spread over both
#      books) prefilled once with MSA and saved; its time is the uncached prefill (resumable: a
#      rerun resumes, and then only the remainder is timed: rerun on a fresh LIB for a clean figure);
#   3. `ask` twice with MSA and once with dense attention on the saved context (cached): each
#      prints "first answer text after X s" (restore + positional probe + question turn).
# Uncached time to first token = the prefill's time + the cached ask's question part. Dense
# uncached at 100K (quadratic attention: hours on two cores) is not run; scripts/bench.sh
# bench_attention gives the dense/MSA ratio per layer for the estimate.
#   tests/bench/ttft.sh [BUILD_DIR (build/release)] [LIB (build/ttft/library)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build/release}"
lib="${2:-$root/build/ttft/library}"
cli="$build/app/sightline-cli"
samples="${SIGHTLINE_CACHE:-$HOME/.cache/sightline}/samples/pdf"
"$cli" add --library "$lib" "$samples/R-intro.pdf" "$samples/R-exts.pdf"
start=$(date +%s.%N)
"$cli" prefill --library "$lib" --max-tokens 100000 --save-every 4096 2>/dev/null
end=$(date +%s.%N)
echo "prefill wall: $(echo "$end - $start" | bc) s"
ask() { "$cli" ask --library "$lib" --effort low "$@" | grep -E "^Read:|first answer text|^KV cache"; }
echo "== MSA, cached (1)"; ask "How do I register native routines in a package?"
echo "== MSA, cached (2)"; ask "Which function reads a data frame from a file?"
echo "== dense, cached";   ask --attention dense "Which function reads a data frame from a file?"
