#!/usr/bin/env bash
# Builds the Google Benchmark executables in release mode and prints their tables.
#   scripts/bench.sh                 every benchmark
#   scripts/bench.sh bench_convert   one of them (extra args go to Google Benchmark)
#   scripts/bench.sh engine          the engine next to llama.cpp on the default model (installs
#                                    llama-cpp-python into the venv first: minutes, once)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
"$here/setup.sh" >/dev/null
"$here/build.sh" bench
dir="$SIGHTLINE_ROOT/build/bench/tests/bench"
if [ "${1:-}" = engine ]; then
  shift
  if ! "$SIGHTLINE_VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    echo "[bench] installing llama-cpp-python (builds llama.cpp from source; takes minutes)"
    CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" "$SIGHTLINE_VENV/bin/python" -m pip install -q llama-cpp-python
  fi
  exec "$SIGHTLINE_VENV/bin/python" "$SIGHTLINE_ROOT/tests/bench/engine_vs_llamacpp.py" "$dir/bench_engine" \
    "$SIGHTLINE_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$@"
fi
if [ $# -gt 0 ]; then
  name="$1"; shift
  "$dir/$name" --benchmark_counters_tabular=true "$@"
else
  for b in "$dir"/bench_*; do
    [ -x "$b" ] || continue
    [ "$(basename "$b")" = bench_engine ] && continue  # `scripts/bench.sh engine` runs it with its peer
    echo "== $(basename "$b")"
    "$b" --benchmark_counters_tabular=true
  done
fi
