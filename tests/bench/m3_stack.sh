#!/usr/bin/env bash
# Issue #27's figure: prefill and decode tokens/s of a random-weight MiniMax-M3 layer stack at a long
# context, native MSA (the file's own indexer) against dense attention, side by side in one run.
# The stack has M3's attention shape per KV group (head_dim 128, index heads of 128, blocks of 128,
# top 16 blocks, one dense leading layer) at a width this machine can run: d_model 512, 8 query /
# 4 KV heads, 8 experts (2 per token) + a shared expert, q8_0 weights. A third run scores every
# index key (native-brute: no Quest pruning, the same selections).
#   CTX=32768 LAYERS=3 tests/bench/m3_stack.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/env.sh"
build="${1:-$root/build/bench}"
ctx="${CTX:-32768}"
layers="${LAYERS:-3}"
threads="${THREADS:-$(nproc)}"
model="$build/m3-stack-${layers}l.gguf"
if [ ! -f "$model" ]; then
  "$SIGHTLINE_VENV/bin/python" "$root/tests/reference/model/make_tiny_model.py" "$model" --arch minimax-m3 \
    --n-layers "$layers" --d-model 512 --n-heads 8 --n-kv-heads 4 --head-dim 128 --ffn 1024 \
    --experts 8 --experts-used 2 --expert-ffn 512 --shared-experts 1 --vocab 1024 --ctx $((ctx + 64)) \
    --msa-block-size 128 --msa-top-k 16 --msa-dense-layers 1 --wtype q8_0 --embd-type f32 >/dev/null
fi
bench="$build/tests/bench/bench_engine"
for att in dense native native-brute; do
  "$bench" --model "$model" --threads "$threads" --ctx "$ctx" --decode "${DECODE:-16}" --attention "$att"
done | tee "$build/m3-stack.jsonl"
python3 - "$build/m3-stack.jsonl" <<'PY'
import json, sys
rows = {r["attention"]: r for r in map(json.loads, open(sys.argv[1]))}
d, n, b = rows["dense"], rows["native"], rows["native-brute"]
print(f"ctx {d['ctx']}, {d['threads']} threads: native MSA / dense = prefill {n['prefill_tok_s'] / d['prefill_tok_s']:.2f}x, "
      f"decode {n['decode_tok_s'] / d['decode_tok_s']:.2f}x; Quest-pruned / brute-force index = prefill "
      f"{n['prefill_tok_s'] / b['prefill_tok_s']:.2f}x, decode {n['decode_tok_s'] / b['decode_tok_s']:.2f}x")
PY
