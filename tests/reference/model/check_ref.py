#!/usr/bin/env python3
"""Self-test of the numpy reference (gguf_llama_ref.py).

    python check_ref.py [--model PATH_TO_SmolLM2.gguf] [--skip-real] [--greedy 24]

Tiny models (written by make_tiny_model.py into a temp dir, several weight types):
  1. f32 vs f64 forward agree (relative max error);
  2. causality: logits at positions < t do not change when tokens >= t change;
  3. an independent, loop-based incremental decoder (per-token KV cache, per-head
     loops, scalar softmax) gives the same logits as the vectorized forward;
  4. RoPE convention: NORMAL rotation on the GGUF's (permuted) q/k weights equals
     NEOX (HF rotate_half) rotation on weights un-permuted with the inverse of
     llama.cpp's convert_hf_to_gguf.py LlamaModel.permute();
  5. linear RoPE scaling by f at positions p equals no scaling at positions p/f.
Real model (SmolLM2-135M-Instruct Q4_1, if present):
  6. ChatML prompt ids from direct vocab look-ups; top-5 last-position logits; greedy
     continuation decoded with the GPT-2 byte-level table must mention Paris;
     f32 vs f64 on the prompt; and, for contrast, NEOX rotation (wrong for llama);
  7. timing of a 32-token forward (cold: incl. dequantization; warm: cached weights).
Exits non-zero on any failure.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_llama_ref as R          # noqa: E402
import make_tiny_model as MK        # noqa: E402

DEFAULT_MODEL = os.path.join(os.environ.get("SIGHTLINE_CACHE", os.path.expanduser("~/.cache/sightline")),
                             "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()
                 / (np.abs(b.astype(np.float64)).max() + 1e-30))


# ----------------------------------------------------------------------------- independent decoder

def incremental_logits(model: R.GGUFModel) -> "callable":
    """A deliberately different implementation: one token at a time with a KV cache,
    explicit per-head loops, scalar RoPE loops and a per-row softmax."""
    hp = model.hp
    W = model.weight

    def rope_vec(v, pos):
        out = v.copy()
        for i in range(hp.n_rot // 2):
            th = pos * hp.rope_freq_scale * hp.rope_base ** (-2.0 * i / hp.n_rot)
            c, s = np.cos(th), np.sin(th)
            a, b = (2 * i, 2 * i + 1) if hp.rope_mode == "norm" else (i, i + hp.n_rot // 2)
            out[a] = v[a] * c - v[b] * s
            out[b] = v[a] * s + v[b] * c
        return out

    def norm(x, w):
        return x / np.sqrt(np.dot(x, x) / x.size + hp.rms_eps) * w

    def run(tokens):
        K = [[] for _ in range(hp.n_layer)]
        Vc = [[] for _ in range(hp.n_layer)]
        rows = []
        g = hp.n_head // hp.n_head_kv
        for pos, tok in enumerate(tokens):
            x = W("token_embd.weight")[tok].astype(np.float64)
            for il in range(hp.n_layer):
                p = f"blk.{il}."
                h = norm(x, W(p + "attn_norm.weight"))
                q = W(p + "attn_q.weight") @ h
                k = W(p + "attn_k.weight") @ h
                v = W(p + "attn_v.weight") @ h
                q = [rope_vec(q[j * hp.head_dim:(j + 1) * hp.head_dim], pos) for j in range(hp.n_head)]
                k = [rope_vec(k[j * hp.head_dim:(j + 1) * hp.head_dim], pos) for j in range(hp.n_head_kv)]
                v = [v[j * hp.head_dim:(j + 1) * hp.head_dim] for j in range(hp.n_head_kv)]
                K[il].append(k)
                Vc[il].append(v)
                outs = []
                for hq in range(hp.n_head):
                    kvh = hq // g
                    scores = np.array([np.dot(q[hq], K[il][t][kvh]) for t in range(pos + 1)])
                    scores = scores / np.sqrt(hp.head_dim)
                    e = np.exp(scores - scores.max())
                    pr = e / e.sum()
                    outs.append(sum(pr[t] * Vc[il][t][kvh] for t in range(pos + 1)))
                x = x + W(p + "attn_output.weight") @ np.concatenate(outs)
                h = norm(x, W(p + "ffn_norm.weight"))
                gt = W(p + "ffn_gate.weight") @ h
                up = W(p + "ffn_up.weight") @ h
                x = x + W(p + "ffn_down.weight") @ (gt / (1 + np.exp(-gt)) * up)
            x = norm(x, W("output_norm.weight"))
            rows.append(W("token_embd.weight" if model.tied else "output.weight") @ x)
        return np.stack(rows)

    return run


def unpermute_llama(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf.py LlamaModel.permute():
    permute = w.reshape(n_head, 2, d/2, n_in).swapaxes(1, 2).reshape(w.shape)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ----------------------------------------------------------------------------- tiny models

TINY_CONFIGS = {
    "f32_tied": [],
    "mixed_untied_msa": ["--wtype", "q4_0", "--attn-type", "bf16", "--ffn-type", "q4_1",
                         "--embd-type", "q8_0", "--untied", "--out-type", "f16", "--msa"],
    "kquant": ["--d-model", "256", "--n-heads", "4", "--head-dim", "64", "--n-kv-heads", "1",
               "--ffn", "512", "--wtype", "q4_k", "--ffn-type", "q6_k", "--embd-type", "q6_k",
               "--untied", "--out-type", "q8_0"],
    "headdim_partial_rope": ["--d-model", "64", "--n-heads", "4", "--head-dim", "32",
                             "--rope-dim", "16", "--n-kv-heads", "4", "--ffn", "128", "--wtype", "f16"],
    "rope_linear2": ["--rope-linear-factor", "2", "--wtype", "q8_0"],
}


def test_tiny(tmp: str) -> None:
    rng = np.random.default_rng(1)
    for name, extra in TINY_CONFIGS.items():
        path = os.path.join(tmp, name + ".gguf")
        with contextlib.redirect_stdout(io.StringIO()):
            MK.main([path, "--seed", "7"] + extra)
        m32 = R.GGUFModel(path, np.float32)
        m64 = R.GGUFModel(path, np.float64)
        V = m32.hp.n_vocab
        toks = rng.integers(0, V, size=24).tolist()
        print(f"[{name}] {m32.hp.n_embd}d {m32.hp.n_layer}L heads {m32.hp.n_head}/{m32.hp.n_head_kv} "
              f"head_dim {m32.hp.head_dim} n_rot {m32.hp.n_rot} tied={m32.tied} "
              f"types={sorted({t.tensor_type.name for t in m32.reader.tensors})}")
        l32 = R.forward(m32, toks)
        l64 = R.forward(m64, toks)
        e = rel_err(l32, l64)
        check(e < 1e-5, f"f32 vs f64 rel max err {e:.2e} < 1e-5")

        t = 10
        toks2 = toks[:t] + rng.integers(0, V, size=len(toks) - t).tolist()
        l64b = R.forward(m64, toks2)
        d = float(np.abs(l64[:t] - l64b[:t]).max())
        dl = float(np.abs(l64[t:] - l64b[t:]).max())
        check(d < 1e-12 and dl > 1e-3,
              f"causality: positions < {t} change by {d:.1e} (later ones by {dl:.2f})")

        inc = incremental_logits(m64)(toks[:12])
        e = rel_err(l64[:12], inc)
        check(e < 1e-10, f"vectorized forward == loop/KV-cache decoder (f64) rel err {e:.1e}")

        if name == "f32_tied":
            # NORMAL rope on permuted GGUF weights == NEOX rope on the HF-order weights
            mh = R.GGUFModel(path, np.float64, rope_mode="neox")
            hp = mh.hp
            for il in range(hp.n_layer):
                for t_, nh in (("attn_q", hp.n_head), ("attn_k", hp.n_head_kv)):
                    key = f"blk.{il}.{t_}.weight"
                    mh._cache[key] = unpermute_llama(m64.weight(key), nh)
            e = rel_err(R.forward(mh, toks), l64)
            check(e < 1e-12, f"NORM rope on GGUF weights == NEOX rope on un-permuted (HF) weights, err {e:.1e}")
            mw = R.GGUFModel(path, np.float64, rope_mode="neox")
            e = rel_err(R.forward(mw, toks), l64)
            check(e > 1e-2, f"NEOX rope on the GGUF weights differs (rel {e:.2f}), so the mode matters")

        if name == "rope_linear2":
            check(abs(m64.hp.rope_freq_scale - 0.5) < 1e-12, "rope.scaling linear factor 2 read as freq_scale 0.5")
            m64._cache.clear()
            m64.hp.rope_freq_scale = 1.0
            lhalf = R.forward(m64, toks, positions=np.arange(len(toks)) / 2.0)
            e = rel_err(lhalf, l64)
            check(e < 1e-12, f"linear scaling x2 == unscaled model at positions p/2, err {e:.1e}")

        # CLI round trip: raw float32 logits file
        out = os.path.join(tmp, name + ".bin")
        with contextlib.redirect_stdout(io.StringIO()) as so:
            R.main([path, "--tokens", ",".join(map(str, toks)), "--logits-out", out])
        cli = json.loads(so.getvalue())
        check(cli["top5_last"] == [[i, v] for i, v in R.top_k(l32[-1])], "CLI top-5 JSON == forward()")
        raw = np.fromfile(out, dtype="<f4").reshape(len(toks), V)
        check(np.array_equal(raw, l32.astype(np.float32)), "CLI --logits-out raw file == forward() (bitwise)")


# ----------------------------------------------------------------------------- real model

PROMPT_PIECES = ["<|im_start|>", "user", "Ċ", "What", "Ġis", "Ġthe", "Ġcapital", "Ġof", "ĠFrance", "?",
                 "<|im_end|>", "Ċ", "<|im_start|>", "assistant", "Ċ"]


def prompt_ids(vocab: list[str], bpe: R.SimpleBPE) -> list[int]:
    idx = {t: i for i, t in enumerate(vocab)}
    ids = []
    for p in PROMPT_PIECES:
        if p in idx:
            ids.append(idx[p])
        else:               # not a single token ("assistant" is "ass"+"istant" in SmolLM2)
            ids.extend(bpe.encode(p.replace("Ġ", " ").replace("Ċ", "\n")))
    return ids


def test_real(path: str, n_greedy: int) -> dict:
    print(f"[real] {path}")
    t0 = time.perf_counter()
    m = R.GGUFModel(path, np.float32)
    vocab = m.vocab()
    bpe = R.SimpleBPE(m.reader)
    text = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    ids = prompt_ids(vocab, bpe)
    print(f"  hparams: {m.hp}")
    print(f"  tensor types: {sorted({t.tensor_type.name for t in m.reader.tensors})}, tied={m.tied}")
    print(f"  prompt ids ({len(ids)}): {ids}")
    print(f"  pieces: {[vocab[i] for i in ids]}")
    check(ids == bpe.encode(text), "direct vocab look-up ids == SimpleBPE.encode(prompt)")
    check(vocab[1] == "<|im_start|>" and vocab[2] == "<|im_end|>", "special tokens are single ids 1, 2")

    logits = R.forward(m, ids)
    t1 = time.perf_counter()
    top5 = R.top_k(logits[-1], 5)
    print(f"  forward f32 (cold, incl. dequant): {t1 - t0:.2f}s")
    print(f"  top-5 last position: {[(i, vocab[i], round(v, 4)) for i, v in top5]}")

    t2 = time.perf_counter()
    gen = R.greedy(m, ids, n_greedy, stop_ids=(2,))
    t3 = time.perf_counter()
    gtext = R.decode(vocab, gen)
    print(f"  greedy ids ({len(gen)} in {t3 - t2:.2f}s): {gen}")
    print(f"  greedy text: {gtext!r}")
    check("Paris" in gtext, "greedy continuation mentions Paris")

    m64 = R.GGUFModel(path, np.float64)
    l64 = R.forward(m64, ids)
    e = rel_err(logits, l64)
    check(e < 1e-4, f"real model f32 vs f64 rel max err {e:.2e} < 1e-4")
    check(int(np.argmax(l64[-1])) == top5[0][0], "f64 agrees on the argmax")
    del m64

    mn = R.GGUFModel(path, np.float32, rope_mode="neox")
    mn._cache = m._cache                         # same dequantized weights
    gn = R.greedy(mn, ids, 12, stop_ids=(2,))
    ln = R.forward(mn, ids)
    print(f"  contrast, NEOX rope (wrong for arch llama): top-5 "
          f"{[(i, vocab[i], round(v, 2)) for i, v in R.top_k(ln[-1], 5)]}, greedy {R.decode(vocab, gn)!r}")

    # timing on 32 tokens: prompt + generated + filler, cold (fresh model) and warm
    seq32 = (ids + gen + ids * 3)[:32]
    tc = time.perf_counter()
    mc = R.GGUFModel(path, np.float32)
    R.forward(mc, seq32)
    tw = time.perf_counter()
    R.forward(mc, seq32)
    te = time.perf_counter()
    timing = {"n_tokens": 32, "cold_incl_load_and_dequant_s": round(tw - tc, 3),
              "warm_forward_s": round(te - tw, 3),
              "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
    print(f"  timing: {json.dumps(timing)}")
    return {"prompt_ids": ids, "top5": top5, "greedy": gen, "greedy_text": gtext, "timing": timing}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Self-test of gguf_llama_ref.py")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--greedy", type=int, default=24)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sightline-ref-") as tmp:
        test_tiny(tmp)
    if not args.skip_real:
        if os.path.exists(args.model):
            test_real(args.model, args.greedy)
        else:
            print(f"[real] skipped: {args.model} not found")
    print("FAILED: " + "; ".join(FAILURES) if FAILURES else "ALL CHECKS PASSED")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
