#!/usr/bin/env python3
"""Sightline's engine next to llama.cpp on the same GGUF file, threads and context sizes.

Runs build/bench/tests/bench/bench_engine (ours) and llama.cpp through llama-cpp-python in the same
invocation, then prints one table: prefill and decode tokens/s per context size and the ratio
ours / llama.cpp. llama-cpp-python is not part of the normal set-up (pip builds llama.cpp from
source, minutes on 2 cores); scripts/bench.sh engine installs it into the venv on first use.

With --rounds N both engines run N times, alternating (ours, llama.cpp, ours, ...), and each
figure is that engine's best of its N runs: this host's speed drifts by 10-20 % within minutes, and
the best of several alternating runs compares the engines at their own unhindered speed.

usage: engine_vs_llamacpp.py BENCH_ENGINE MODEL [--threads N] [--ctx 128,512,4096] [--decode 32] [--rounds N]
"""
import argparse
import json
import subprocess
import sys
import time


def ours(exe, model, threads, ctxs, decode):
    out = subprocess.run([exe, "--model", model, "--threads", str(threads), "--ctx", ",".join(map(str, ctxs)),
                          "--decode", str(decode)], check=True, capture_output=True, text=True).stdout
    return {r["ctx"]: r for r in (json.loads(l) for l in out.splitlines() if l.startswith("{"))}


def llamacpp(model, threads, ctxs, decode):
    import llama_cpp  # noqa: imported late: optional peer

    rows = {}
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=model, n_ctx=max(ctxs) + decode + 8, n_threads=threads,
                          n_threads_batch=threads, n_batch=512, n_ubatch=512, verbose=False, logits_all=False)
    load_s = time.perf_counter() - t0
    n_vocab = llm.n_vocab()
    for ctx in ctxs:
        prompt = [(i * 7919 + 13) % n_vocab for i in range(ctx)]
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        p0 = time.perf_counter()
        llm.eval(prompt)
        prefill_s = time.perf_counter() - p0
        d0 = time.perf_counter()
        for i in range(decode):
            llm.eval([(i * 31 + 7) % n_vocab])
        decode_s = time.perf_counter() - d0
        rows[ctx] = {"engine": "llama.cpp", "ctx": ctx, "prefill_tok_s": ctx / prefill_s,
                     "decode_tok_s": decode / decode_s, "load_s": load_s}
    return rows, llama_cpp.__version__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_engine")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", default="128,512,4096")
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    ctxs = [int(c) for c in a.ctx.split(",")]
    mine, theirs = {}, {}

    def keep_best(best, rows):
        for c, r in rows.items():
            b = best.setdefault(c, dict(r))
            for k in ("prefill_tok_s", "decode_tok_s"):
                b[k] = max(b[k], r[k])

    for _ in range(max(1, a.rounds)):
        keep_best(mine, ours(a.bench_engine, a.model, a.threads, ctxs, a.decode))
        rows, version = llamacpp(a.model, a.threads, ctxs, a.decode)
        keep_best(theirs, rows)
    rounds = f", best of {a.rounds} alternating rounds" if a.rounds > 1 else ""
    print(f"model {a.model}, {a.threads} threads; llama.cpp via llama-cpp-python {version}{rounds}")
    print(f"{'ctx':>6} | {'prefill tok/s':>28} | {'decode tok/s':>28}")
    print(f"{'':>6} | {'sightline':>9} {'llama.cpp':>9} {'ratio':>7} | {'sightline':>9} {'llama.cpp':>9} {'ratio':>7}")
    for c in ctxs:
        m, t = mine[c], theirs[c]
        print(f"{c:>6} | {m['prefill_tok_s']:>9.1f} {t['prefill_tok_s']:>9.1f} {m['prefill_tok_s'] / t['prefill_tok_s']:>6.2f}x"
              f" | {m['decode_tok_s']:>9.1f} {t['decode_tok_s']:>9.1f} {m['decode_tok_s'] / t['decode_tok_s']:>6.2f}x")
    first = mine[ctxs[0]]
    print(f"sightline: model load {first['load_s']:.3f} s, peak RSS {max(r['peak_rss_mib'] for r in mine.values()):.0f} MiB;"
          f" llama.cpp: model load {theirs[ctxs[0]]['load_s']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
