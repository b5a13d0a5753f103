#!/usr/bin/env python3
"""llama.cpp against the numpy reference on one GGUF: do the two independent implementations agree?

    pip install llama-cpp-python==0.3.36 numpy gguf    # in any venv (builds llama.cpp: minutes)
    python make_tiny_model.py /tmp/qwen2.gguf --arch qwen2 --wtype f32
    python vs_llama_cpp.py /tmp/qwen2.gguf [--tokens 5,17,99,...] [--threads 1]

Feeds the same token ids to llama.cpp (llama-cpp-python, all-position logits) and to
gguf_llama_ref.py (a subprocess; --ref-python names an interpreter with numpy and gguf, e.g. the
project's venv, where this one has llama_cpp only), and
prints the worst per-position normalized squared error and the argmax agreement. Use it when a
tiny file of a new architecture is added to make_tiny_model.py: llama.cpp reading the file and
agreeing says the file is what that architecture's real files are, and then the numpy reference
(which CI runs without llama.cpp, in tst_llama_reference) is a fair judge of our engine on it.
Exits 1 when the error passes --max-nmse (default 1e-5: f32 weights; quantized weights differ
by llama.cpp's 8-bit activations, so give those a looser bound).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", default="5,17,99,200,3,42,7,150,66,250,12,31,8,77,123,9,41,55,201,18,33")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-nmse", type=float, default=1e-5)
    ap.add_argument("--ref-python", default=sys.executable, help="interpreter for gguf_llama_ref.py")
    args = ap.parse_args()
    from llama_cpp import Llama

    toks = [int(t) for t in args.tokens.split(",")]
    llm = Llama(model_path=args.model, n_ctx=max(64, len(toks) + 1), logits_all=True, verbose=False,
                n_threads=args.threads)
    llm.eval(toks)
    ours = np.array(llm.scores[: len(toks)], dtype=np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ref.npy")
        subprocess.run([args.ref_python, os.path.join(HERE, "gguf_llama_ref.py"), args.model, "--tokens",
                        args.tokens, "--logits-out", out], check=True, capture_output=True)
        ref = np.load(out).astype(np.float64)
    nmse = np.sum((ours - ref) ** 2, axis=1) / np.sum(ref ** 2, axis=1)
    agree = int((ours.argmax(1) == ref.argmax(1)).sum())
    print(f"{os.path.basename(args.model)}: llama.cpp vs numpy reference, {len(toks)} positions: "
          f"worst NMSE {nmse.max():.2e}, argmax agrees at {agree} of {len(toks)}")
    return 0 if nmse.max() <= args.max_nmse else 1


if __name__ == "__main__":
    sys.exit(main())
