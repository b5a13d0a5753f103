#!/usr/bin/env bash
# Builds the Google Benchmark executables in release mode and prints their tables.
#   scripts/bench.sh                 every benchmark
#   scripts/bench.sh bench_convert   one of them (extra args go to Google Benchmark)
#   scripts/bench.sh engine          the engine next to llama.cpp on the default model (installs
#                                    llama-cpp-python into the venv first: minutes, once)
#   scripts/bench.sh engine-1b       the same on a random-weight 1B-shaped Llama 3 in llama.cpp's
#                                    Q4_K_M mix (written once into the cache: ~1 min, 585 MB)
# Extra arguments go to engine_vs_llamacpp.py (--ctx 512,4096,16384 --rounds 5 --threads N ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/env.sh"
"$here/setup.sh" >/dev/null
"$here/build.sh" bench
dir="$SIGHTLINE_ROOT/build/bench/tests/bench"
if [ "${1:-}" = engine ] || [ "${1:-}" = engine-1b ]; then
  which="$1"; shift
  if ! "$SIGHTLINE_VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    echo "[bench] installing llama-cpp-python 0.3.36 (builds llama.cpp from source; takes minutes)"
    CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" "$SIGHTLINE_VENV/bin/python" -m pip install -q llama-cpp-python==0.3.36
  fi
  model="$SIGHTLINE_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ "$which" = engine-1b ]; then
    model="$SIGHTLINE_CACHE/bench/llama1b-q4km.gguf"
    if [ ! -f "$model" ]; then
      mkdir -p "$(dirname "$model")"
      echo "[bench] writing $model (random weights, Llama 3.2 1B's layer shapes, vocabulary 300)"
      "$SIGHTLINE_VENV/bin/python" "$SIGHTLINE_ROOT/tests/reference/model/make_tiny_model.py" "$model.part" \
        --d-model 2048 --n-layers 16 --n-heads 32 --n-kv-heads 8 --head-dim 64 --ffn 8192 --vocab 300 \
        --ctx 16384 --rope-base 500000 --untied --mix q4_k_m
      mv "$model.part" "$model"
    fi
  fi
  exec "$SIGHTLINE_VENV/bin/python" "$SIGHTLINE_ROOT/tests/bench/engine_vs_llamacpp.py" "$dir/bench_engine" \
    "$model" "$@"
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
