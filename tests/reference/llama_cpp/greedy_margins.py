#!/usr/bin/env python3
"""llama.cpp's greedy continuations of the default model, with the margin of each choice, as data.

For every prompt of prompts.txt, llama.cpp (through llama-cpp-python) evaluates the prompt, then
decodes N greedy tokens one at a time (no repetition penalty, nothing but the argmax), and records
at each step the chosen token and its margin: the log-probability of llama.cpp's top choice minus
that of its second. tests/core/model/tst_llama_cpp_greedy.cpp feeds the same tokens to our engine
(teacher forcing: prompt, then llama.cpp's tokens one by one through the decode path) and requires
our top choice to equal llama.cpp's wherever the margin exceeds 0.1 nat. The data is committed, so
CI checks it without building llama.cpp.

    pip install llama-cpp-python numpy            # in any venv; builds llama.cpp (~20 min on 2 cores)
    python3 tests/reference/llama_cpp/greedy_margins.py [--model M.gguf] [--n 32] [--threads 2] \\
        [--out tests/reference/llama_cpp/smollm2_greedy.json] [--plain-only]
    # Gemma 3 270M (base model: plain prompts only):
    python3 tests/reference/llama_cpp/greedy_margins.py --plain-only \\
        --model ~/.cache/sightline/models/gemma-3-270m-q4_k_m.gguf --out tests/reference/llama_cpp/gemma3_greedy.json \\
        --long-prompt tests/reference/llama_cpp/long_prompt.txt

Prompts starting with "chat: " are wrapped as one ChatML user turn (the default model's template,
no system turn) and tokenized with special tokens parsed. The prompt's token ids are recorded too,
so both engines start from the same tokens.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.expanduser("~/.cache/sightline/models/SmolLM2-135M-Instruct.Q4_1.gguf")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_prompts(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            out.append(line)
    return out


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompts", default=os.path.join(HERE, "prompts.txt"))
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "smollm2_greedy.json"))
    ap.add_argument("--long-prompt", help="a text file used as one more (plain) prompt: Gemma 3's sliding "
                    "window (512) needs a prompt longer than the window")
    ap.add_argument("--plain-only", action="store_true",
                    help="skip the chat: prompts (a base model without the ChatML template, e.g. Gemma 3 270M)")
    args = ap.parse_args(argv)

    import llama_cpp  # imported here so --help works without it

    prompts = read_prompts(args.prompts)
    if args.long_prompt:
        with open(args.long_prompt, encoding="utf-8") as f:
            prompts.append(f.read())
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_batch=2048, n_threads=args.threads,
                          logits_all=True, verbose=False)
    rows = []
    for text in prompts:
        if args.plain_only and text.startswith("chat: "):
            continue
        if text.startswith("chat: "):
            wrapped = "<|im_start|>user\n" + text[len("chat: "):] + "<|im_end|>\n<|im_start|>assistant\n"
            ids = llm.tokenize(wrapped.encode("utf-8"), add_bos=True, special=True)
        else:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        llm.reset()
        llm.eval(ids)
        tokens, margins, top_lp = [], [], []
        for _ in range(args.n):
            lp = log_softmax(llm.scores[llm.n_tokens - 1])
            order = np.argsort(-lp)[:2]
            t = int(order[0])
            tokens.append(t)
            margins.append(round(float(lp[order[0]] - lp[order[1]]), 4))
            top_lp.append(round(float(lp[order[0]]), 4))
            llm.eval([t])
        rows.append({"prompt": text, "ids": [int(i) for i in ids], "tokens": tokens, "margins": margins,
                     "top_logprob": top_lp,
                     "text": llm.detokenize(tokens).decode("utf-8", errors="replace")})
        print(f"{text[:50]!r:54} -> {rows[-1]['text'][:60]!r}", file=sys.stderr)

    out = {
        "what": "llama.cpp greedy continuations with top-1 minus top-2 log-probability margins",
        "generator": "tests/reference/llama_cpp/greedy_margins.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "threads": args.threads,
        "n": args.n,
        "prompts": rows,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(rows)} prompts x {args.n} tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
