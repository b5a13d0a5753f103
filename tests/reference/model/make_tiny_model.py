#!/usr/bin/env python3
"""Write tiny random-weight llama GGUF models for tests (deterministic with --seed).

    python make_tiny_model.py OUT.gguf [--d-model 64 --n-layers 2 --n-heads 4 --n-kv-heads 2
        --head-dim 16 --ffn 96 --vocab 300 --ctx 256 --rope-base 10000 --eps 1e-5
        --tied | --untied  --wtype q8_0 --embd-type f32 --out-type f16 --msa ...]

The file mirrors what llama.cpp's converter writes for arch "llama" (or --arch qwen2 / gemma3 /
minimax-m3): the same metadata
keys, tensor names, ggml dims order ({n_in, n_out} for matrices, i.e. numpy (n_out, n_in)),
F32 norm weights, and a minimal GPT-2 byte-level BPE tokenizer (256 byte tokens,
merges learned from a short built-in text, ChatML special tokens, ChatML template).

Weight types (--wtype for all block matrices, --embd-type for token_embd, --out-type for
output.weight; --attn-type / --ffn-type override per class):
  f32, f16, bf16, q8_0, q4_0, q4_1,
  q5_0, q5_1                       : quantized with gguf.quants.quantize (the gguf package).
  q4_k, q6_k                       : the gguf package (0.17) has NO quantizer for K-quants
                                     (only dequantizers). We pack them with our own simple
                                     round-to-nearest quantizer below and verify each packed
                                     tensor by dequantizing it with gguf.quants.dequantize.
                                     K-quants need every row length (n_in) to be a multiple
                                     of 256, e.g. --d-model 256 --ffn 512 --n-heads 4
                                     --head-dim 64.
Block types need n_in % 32 == 0 (q4_0/q4_1/q5_0/q5_1/q8_0).

--msa adds MiniMax-M3-style indexer keys and tensors (see /work/shared/MSA.md). OUR TEST
CONVENTION: the architecture stays "llama" and the keys use the "llama." prefix:
  llama.attention.indexer.head_count   (default n_kv_heads: one index head per KV group)
  llama.attention.indexer.key_length   (default head_dim)
  llama.attention.indexer.top_k        (default 4)
  llama.attention.indexer.block_size   (default 16)
  llama.attention.indexer.local_blocks (default 1)
  llama.leading_dense_block_count      (default 1)
and every layer N >= leading_dense_block_count gets F32 tensors
  blk.N.indexer.q_proj.weight {n_embd, head_count*key_length}
  blk.N.indexer.k_proj.weight {n_embd, key_length}
  blk.N.indexer.q_norm.weight {key_length}
  blk.N.indexer.k_norm.weight {key_length}
--arch minimax-m3 writes the real M3 layout (llama.cpp's LLM_ARCH_MINIMAX_M3 names and keys, "minimax-m3."
prefix): NeoX RoPE on the first head_dim/2 dims, per-head attn_q_norm/attn_k_norm, the indexer in
every layer >= leading_dense_block_count, and in those layers a mixture of experts instead of the
dense FFN: ffn_gate_inp {n_embd, E} (F32), exp_probs_b.bias {E}, ffn_{gate,up}_exps {n_embd, Fe, E},
ffn_down_exps {Fe, n_embd, E}, ffn_{gate,up,down}_shexp (Fe * shared); keys expert_count,
expert_used_count, expert_feed_forward_length, expert_shared_count, expert_gating_func (2: sigmoid),
expert_weights_norm, expert_weights_scale. --experts N with --arch llama writes a Mixtral-style file
(every layer routed, softmax, no bias, no shared expert). The llama-arch --msa variant remains so the
native-MSA path can be tested on plain llama models. gguf_llama_ref.py uses the indexer
tensors with --msa native (dense attention otherwise). For hostile-file tests,
--msa-bad-q-rows N writes every indexer.q_proj with N rows instead of head_count*key_length.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import quantize, dequantize

QK_K = 256

TYPE_NAMES = {
    "f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0,
    "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1, "q4_k": QT.Q4_K, "q6_k": QT.Q6_K,
    "q2_k": QT.Q2_K, "q3_k": QT.Q3_K, "q5_k": QT.Q5_K,
}

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2 (as in SmolLM2)

BPE_CORPUS = (
    "The quick brown fox jumps over the lazy dog. What is the capital of France? "
    "The capital of France is Paris. Sightline reads documents, slides, images and videos "
    "and answers questions about them with citations to the page, slide or second. "
    "the the the and and in in on on of of to to is is it it that that this this with with "
    "user assistant system hello world answer question page slide video image text"
)


# ----------------------------------------------------------------------------- tokenizer

def bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn_merges(n_merges: int) -> list[tuple[str, str]]:
    """Tiny deterministic byte-level BPE training on BPE_CORPUS (ties: lexicographic)."""
    b2u = bytes_to_unicode()
    words = Counter()
    for i, w in enumerate(BPE_CORPUS.split(" ")):
        piece = (" " + w) if i else w
        words[tuple(b2u[b] for b in piece.encode("utf-8"))] += 1
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        words = new
    return merges


def build_vocab(n_vocab: int):
    """tokens, token_types, merges: specials (CONTROL) at 0..2, 256 byte tokens, merge results,
    then <|unused_N|> (UNUSED) if the corpus runs out of merges."""
    base = len(SPECIAL_TOKENS) + 256
    if n_vocab < base:
        raise SystemExit(f"--vocab must be >= {base}")
    b2u = bytes_to_unicode()
    tokens = list(SPECIAL_TOKENS) + [b2u[b] for b in range(256)]
    types = [int(gguf.TokenType.CONTROL)] * len(SPECIAL_TOKENS) + [int(gguf.TokenType.NORMAL)] * 256
    merges = []
    seen = set(tokens)
    for a, b in learn_merges(n_vocab - base):
        if a + b in seen:
            continue
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(int(gguf.TokenType.NORMAL))
        seen.add(a + b)
    i = 0
    while len(tokens) < n_vocab:
        tokens.append(f"<|unused_{i}|>")
        types.append(int(gguf.TokenType.UNUSED))
        i += 1
    return tokens, types, merges


# ----------------------------------------------------------------------------- K-quant packers

def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q6_k(w: np.ndarray) -> np.ndarray:
    """Simple round-to-nearest Q6_K: per 16-value sub-block int8 scale, 6-bit quants.
    Layout per 256-block (210 bytes): ql[128], qh[64], scales[16] int8, d f16."""
    x = w.reshape(-1, QK_K).astype(np.float32)
    nb = x.shape[0]
    sub = x.reshape(nb, 16, 16)
    amax = np.abs(sub).max(axis=-1)                          # (nb, 16)
    s = amax / 31.0                                          # q in [-32, 31]
    d = _f16(s.max(axis=-1) / 127.0).astype(np.float32)      # (nb,)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.round(s / d[:, None]), 0).clip(-128, 127).astype(np.int8)
        eff = d[:, None] * sc.astype(np.float32)             # (nb, 16)
        q = np.where(eff[..., None] > 0, np.round(sub / eff[..., None]), 0)
    L = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(nb, 2, 4, 32)   # (half, k, l)
    lo, hi = L & 0x0F, L >> 4
    ql = np.empty((nb, 2, 64), np.uint8)
    ql[:, :, 0:32] = lo[:, :, 0] | (lo[:, :, 2] << 4)
    ql[:, :, 32:64] = lo[:, :, 1] | (lo[:, :, 3] << 4)
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)   # (nb, 2, 32)
    blocks = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8),
                             d.astype(np.float16).reshape(nb, 1).view(np.uint8)], axis=1)
    return blocks.reshape(w.shape[0], -1)


def quantize_q4_k(w: np.ndarray, nmax: int = 15) -> np.ndarray:
    """Simple Q4_K: 8 sub-blocks of 32, y = d*sc*q - dmin*m, 6-bit sc/m, 4-bit q.
    Layout per 256-block (144 bytes): d f16, dmin f16, scales[12] (packed 6-bit), qs[128].
    nmax=31 gives Q5_K's header and 5-bit q, returned as (header, q) for quantize_q5_k."""
    x = w.reshape(-1, QK_K).astype(np.float32)
    nb = x.shape[0]
    sub = x.reshape(nb, 8, 32)
    mn = np.minimum(sub.min(axis=-1), 0.0)
    mx = sub.max(axis=-1)
    scale = (mx - mn) / float(nmax)
    mins = -mn                                               # >= 0
    d = _f16(scale.max(axis=-1) / 63.0).astype(np.float32)
    dmin = _f16(mins.max(axis=-1) / 63.0).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.round(scale / d[:, None]), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dmin[:, None] > 0, np.round(mins / dmin[:, None]), 0).clip(0, 63).astype(np.uint8)
        eff = d[:, None] * sc.astype(np.float32)
        off = dmin[:, None] * m.astype(np.float32)
        q = np.where(eff[..., None] > 0, np.round((sub + off[..., None]) / eff[..., None]), 0)
    q = q.clip(0, nmax).astype(np.uint8).reshape(nb, 4, 2, 32)
    packed = np.empty((nb, 12), np.uint8)
    packed[:, 0:4] = (sc[:, 0:4] & 0x3F) | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = (m[:, 0:4] & 0x3F) | ((m[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    header = np.concatenate([d.astype(np.float16).reshape(nb, 1).view(np.uint8),
                             dmin.astype(np.float16).reshape(nb, 1).view(np.uint8), packed], axis=1)
    if nmax != 15:
        return header, q
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(nb, 128)
    return np.concatenate([header, qs], axis=1).reshape(w.shape[0], -1)


def quantize_q5_k(w: np.ndarray) -> np.ndarray:
    """Q5_K: Q4_K's fit with 5-bit q. Layout (176 bytes): d, dmin, scales[12], qh[32], qs[128];
    element 64*J + 32*h + l has its low nibble in qs[32*J + l] (h: high nibble) and its fifth bit
    at bit 2*J + h of qh[l]."""
    nb = w.size // QK_K
    header, q = quantize_q4_k(w, nmax=31)                     # q: (nb, J=4, h=2, l=32)
    qs = ((q[:, :, 0] & 0x0F) | ((q[:, :, 1] & 0x0F) << 4)).reshape(nb, 128)
    bits = (q >> 4).astype(np.uint8)                          # (nb, 4, 2, 32)
    shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)   # (4, 2)
    qh = np.bitwise_or.reduce(bits << shifts[None, :, :, None], axis=(1, 2)).astype(np.uint8)  # (nb, 32)
    return np.concatenate([header, qh, qs], axis=1).reshape(w.shape[0], -1)


def _pack_2bit(q: np.ndarray) -> np.ndarray:
    """(nb, 256) values 0..3 -> (nb, 64): element 128*h + 32*s + l in bits 2s of byte 32*h + l."""
    nb = q.shape[0]
    q4 = q.reshape(nb, 2, 4, 32).astype(np.uint8)
    out = q4[:, :, 0] | (q4[:, :, 1] << 2) | (q4[:, :, 2] << 4) | (q4[:, :, 3] << 6)
    return out.reshape(nb, 64)


def quantize_q2_k(w: np.ndarray) -> np.ndarray:
    """Simple Q2_K: 16 sub-blocks of 16, y = d*sc*q - dmin*m, 4-bit sc/m, 2-bit q.
    Layout (84 bytes): scales[16] (sc | m << 4), qs[64], d f16, dmin f16."""
    x = w.reshape(-1, QK_K).astype(np.float32)
    nb = x.shape[0]
    sub = x.reshape(nb, 16, 16)
    mn = np.minimum(sub.min(axis=-1), 0.0)
    scale = (sub.max(axis=-1) - mn) / 3.0
    mins = -mn
    d = _f16(scale.max(axis=-1) / 15.0).astype(np.float32)
    dmin = _f16(mins.max(axis=-1) / 15.0).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.ceil(scale / d[:, None]), 0).clip(0, 15).astype(np.uint8)
        m = np.where(dmin[:, None] > 0, np.round(mins / dmin[:, None]), 0).clip(0, 15).astype(np.uint8)
        eff = d[:, None] * sc.astype(np.float32)
        off = dmin[:, None] * m.astype(np.float32)
        q = np.where(eff[..., None] > 0, np.round((sub + off[..., None]) / eff[..., None]), 0)
    q = q.clip(0, 3).astype(np.uint8).reshape(nb, QK_K)
    blocks = np.concatenate([sc | (m << 4), _pack_2bit(q), d.astype(np.float16).reshape(nb, 1).view(np.uint8),
                             dmin.astype(np.float16).reshape(nb, 1).view(np.uint8)], axis=1)
    return blocks.reshape(w.shape[0], -1)


def quantize_q3_k(w: np.ndarray) -> np.ndarray:
    """Simple Q3_K: 16 sub-blocks of 16, y = d*(sc-32)*q, 6-bit sc, q in -4..3 (low 2 bits in qs,
    bit 2 of q+4 in hmask: bit s of hmask[l] for element 32*s + l).
    Layout (110 bytes): hmask[32], qs[64], scales[12] (low nibbles in 0..7, high 2 bits in 8..11), d f16."""
    x = w.reshape(-1, QK_K).astype(np.float32)
    nb = x.shape[0]
    sub = x.reshape(nb, 16, 16)
    s = np.abs(sub).max(axis=-1) / 4.0
    d = _f16(s.max(axis=-1) / 31.0).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.where(d[:, None] > 0, np.round(s / d[:, None]), 0).clip(0, 31).astype(np.int32)
        eff = d[:, None] * ls.astype(np.float32)
        q = np.where(eff[..., None] > 0, np.round(sub / eff[..., None]), 0)
    u = (q.clip(-4, 3) + 4).astype(np.uint8).reshape(nb, QK_K)      # 0..7
    qs = _pack_2bit(u & 3)
    hbit = (u >> 2).reshape(nb, 8, 32)
    hmask = np.bitwise_or.reduce(hbit << np.arange(8, dtype=np.uint8)[None, :, None], axis=1).astype(np.uint8)
    stored = (ls + 32).astype(np.uint8)                               # (nb, 16), 6 bits
    scales = np.zeros((nb, 12), np.uint8)
    scales[:, 0:8] = (stored[:, 0:8] & 0x0F) | ((stored[:, 8:16] & 0x0F) << 4)
    for j in range(16):
        scales[:, 8 + j % 4] |= ((stored[:, j] >> 4) & 3) << (2 * (j // 4))
    blocks = np.concatenate([hmask, qs, scales, d.astype(np.float16).reshape(nb, 1).view(np.uint8)], axis=1)
    return blocks.reshape(w.shape[0], -1)


def encode_tensor(name: str, w: np.ndarray, qtype: QT) -> np.ndarray:
    """Bytes/array to hand to GGUFWriter.add_tensor(raw_dtype=qtype). Verifies the result
    dequantizes (with gguf's dequantizer) to within the expected error of w."""
    n_in = w.shape[-1]
    k_packers = {QT.Q2_K: quantize_q2_k, QT.Q3_K: quantize_q3_k, QT.Q4_K: quantize_q4_k,
                 QT.Q5_K: quantize_q5_k, QT.Q6_K: quantize_q6_k}
    if qtype in k_packers:
        if n_in % QK_K:
            raise SystemExit(f"{name}: {qtype.name} needs rows (n_in={n_in}) to be a multiple of 256")
        data = k_packers[qtype](w)
    else:
        bs = gguf.GGML_QUANT_SIZES[qtype][0]
        if n_in % bs:
            raise SystemExit(f"{name}: {qtype.name} needs rows (n_in={n_in}) to be a multiple of {bs}")
        data = quantize(w.astype(np.float32), qtype)
    back = dequantize(data, qtype).reshape(w.shape)
    tol = {QT.F32: 0, QT.F16: 1e-3, QT.BF16: 1e-2, QT.Q8_0: 1e-2, QT.Q6_K: 4e-2,
           QT.Q4_0: 0.2, QT.Q4_1: 0.15, QT.Q5_0: 0.1, QT.Q5_1: 0.1, QT.Q4_K: 0.2,
           QT.Q5_K: 0.1, QT.Q3_K: 0.4, QT.Q2_K: 0.6}[qtype]
    rel = float(np.abs(back - w).max() / (np.abs(w).max() + 1e-30))
    if rel > tol:
        raise RuntimeError(f"{name}: {qtype.name} round trip error {rel:.3g} > {tol}")
    return data


# ----------------------------------------------------------------------------- model

def build(args) -> dict:
    rng = np.random.default_rng(args.seed)
    D, L, H, Hkv = args.d_model, args.n_layers, args.n_heads, args.n_kv_heads
    Dh = args.head_dim or D // H
    F, V = args.ffn, args.vocab
    if H % Hkv:
        raise SystemExit("--n-heads must be a multiple of --n-kv-heads")
    if Dh % 2:
        raise SystemExit("head_dim must be even")
    arch = args.arch
    a = arch + "."
    m3 = arch == "minimax-m3"
    if m3:
        args.msa = True               # M3 files carry the indexer in every sparse layer
    E = args.experts or (4 if m3 else 0)
    if E and arch in ("gemma3", "qwen2"):
        raise SystemExit("--experts: " + arch + " has no mixture of experts here")
    K = args.experts_used or min(2, E)
    Fe = args.expert_ffn or F
    S = args.shared_experts if args.shared_experts is not None else (1 if m3 else 0)
    moe_dense = args.msa_dense_layers if m3 else 0   # M3: the leading dense layers are dense in both

    w = gguf.GGUFWriter(args.out, arch)      # writes general.architecture
    w.add_name(args.name)
    w.add_type("model")
    w.add_uint32(a + "context_length", args.ctx)
    w.add_uint32(a + "embedding_length", D)
    w.add_uint32(a + "block_count", L)
    w.add_uint32(a + "feed_forward_length", F)
    w.add_uint32(a + "attention.head_count", H)
    w.add_uint32(a + "attention.head_count_kv", Hkv)
    if Dh != D // H or arch in ("gemma3", "minimax-m3"):   # llama.cpp writes these when head_dim != n_embd / n_head
        w.add_uint32(a + "attention.key_length", Dh)
        w.add_uint32(a + "attention.value_length", Dh)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", args.eps)
    w.add_float32(a + "rope.freq_base", args.rope_base)
    w.add_uint32(a + "rope.dimension_count", args.rope_dim or (Dh // 2 if m3 else Dh))
    if args.rope_linear_factor and args.rope_linear_factor != 1.0:
        w.add_string(a + "rope.scaling.type", "linear")
        w.add_float32(a + "rope.scaling.factor", args.rope_linear_factor)
    if E:
        w.add_uint32(a + "expert_count", E)
        w.add_uint32(a + "expert_used_count", args.bad_expert_used or K)
        w.add_uint32(a + "expert_feed_forward_length", Fe)
        if m3:
            w.add_uint32(a + "expert_shared_count", S)
            w.add_uint32(a + "expert_gating_func", args.gating_func or (2 if args.gating == "sigmoid" else 1))
            w.add_bool(a + "expert_weights_norm", args.expert_weights_norm)
            w.add_float32(a + "expert_weights_scale", args.expert_weights_scale)
    if arch == "gemma3" and args.sliding_window:
        w.add_uint32(a + "attention.sliding_window", args.sliding_window)
    w.add_uint32(a + "vocab_size", V)
    w.add_custom_alignment(gguf.GGUF_DEFAULT_ALIGNMENT)   # general.alignment = 32 (the default)
    w.add_uint32("general.file_type", {QT.F32: 0, QT.F16: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q8_0: 7,
                                        QT.Q5_0: 8, QT.Q5_1: 9, QT.Q6_K: 18, QT.Q4_K: 15, QT.BF16: 32, QT.Q2_K: 10, QT.Q3_K: 12, QT.Q5_K: 17}[args.wtype_q])
    w.add_uint32("general.quantization_version", gguf.GGML_QUANT_VERSION)

    tokens, types, merges = build_vocab(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("minimax-m2" if arch == "minimax-m3" else "default")  # real M3 files: the o200k split
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)

    msa_dense = None
    if args.msa:
        ih = args.msa_heads or Hkv
        ik = args.msa_key_length or Dh
        msa_dense = args.msa_dense_layers
        w.add_uint32(a + "attention.indexer.head_count", ih)
        w.add_uint32(a + "attention.indexer.key_length", ik)
        w.add_uint32(a + "attention.indexer.top_k", args.msa_top_k)
        w.add_uint32(a + "attention.indexer.block_size", args.msa_block_size)
        w.add_uint32(a + "attention.indexer.local_blocks", args.msa_local_blocks)
        w.add_uint32(a + "leading_dense_block_count", msa_dense)

    def mat(n_out, n_in, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(n_in)
        return (rng.standard_normal((n_out, n_in)) * s).astype(np.float32)

    def mats(n_exp, n_out, n_in):
        return np.stack([mat(n_out, n_in) for _ in range(n_exp)])

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    summary = Counter()

    def put(name, arr, qtype=QT.F32):
        if arr.ndim == 3:   # experts: encode as rows, then restore the expert axis
            data = encode_tensor(name, arr.reshape(-1, arr.shape[-1]), qtype)
            data = data.reshape(arr.shape[0], arr.shape[1], -1)
        else:
            data = encode_tensor(name, arr, qtype)
        if qtype in (QT.F32, QT.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
        summary[qtype.name] += 1

    def more_bits(il, qtype):
        # --mix q4_k_m: llama.cpp's Q4_K_M gives attn_v and ffn_down Q6_K in the first and last
        # eighth of the layers and every third one between (llama-quant.cpp use_more_bits).
        if args.mix != "q4_k_m":
            return qtype
        return QT.Q6_K if il < L // 8 or il >= 7 * L // 8 or (il - L // 8) % 3 == 2 else qtype

    put("token_embd.weight", mat(V, D, 0.5), args.embd_q)   # std 0.5: tied logits not dominated by the input token
    for il in range(L):
        p = f"blk.{il}."
        put(p + "attn_norm.weight", norm(D))
        put(p + "attn_q.weight", mat(H * Dh, D), args.attn_q)
        put(p + "attn_k.weight", mat(Hkv * Dh, D), args.attn_q)
        put(p + "attn_v.weight", mat(Hkv * Dh, D), more_bits(il, args.attn_q))
        put(p + "attn_output.weight", mat(D, H * Dh), args.attn_q)
        if arch == "qwen2":   # Qwen2's q/k/v biases (llama.cpp requires them for this arch)
            put(p + "attn_q.bias", (0.2 * rng.standard_normal(H * Dh)).astype(np.float32))
            put(p + "attn_k.bias", (0.2 * rng.standard_normal(Hkv * Dh)).astype(np.float32))
            put(p + "attn_v.bias", (0.2 * rng.standard_normal(Hkv * Dh)).astype(np.float32))
        put(p + "ffn_norm.weight", norm(D))
        if E and il >= moe_dense:   # mixture of experts, stacked as llama.cpp stores them
            put(p + "ffn_gate_inp.weight", mat(E, D, 1.0))        # F32, as converters keep it
            if m3 and not args.no_probs_bias:
                put(p + "exp_probs_b.bias", (0.3 * rng.standard_normal(E)).astype(np.float32))
            put(p + "ffn_gate_exps.weight", mats(E, args.bad_expert_rows or Fe, D), args.ffn_q)
            put(p + "ffn_up_exps.weight", mats(E, Fe, D), args.ffn_q)
            put(p + "ffn_down_exps.weight", mats(E, D, Fe), args.ffn_q)
            if S:
                put(p + "ffn_gate_shexp.weight", mat(Fe * S, D), args.ffn_q)
                put(p + "ffn_up_shexp.weight", mat(Fe * S, D), args.ffn_q)
                put(p + "ffn_down_shexp.weight", mat(D, Fe * S), args.ffn_q)
        else:
            put(p + "ffn_gate.weight", mat(F, D), args.ffn_q)
            put(p + "ffn_up.weight", mat(F, D), args.ffn_q)
            put(p + "ffn_down.weight", mat(D, F), more_bits(il, args.ffn_q))
        if m3:   # per-head q/k norms (one head_dim vector for every head)
            put(p + "attn_q_norm.weight", norm(Dh))
            put(p + "attn_k_norm.weight", norm(Dh))
        if arch == "gemma3":   # per-head q/k norms and the norms after attention and FFN
            put(p + "attn_q_norm.weight", norm(Dh))
            put(p + "attn_k_norm.weight", norm(Dh))
            put(p + "post_attention_norm.weight", norm(D))
            put(p + "post_ffw_norm.weight", norm(D))
        if msa_dense is not None and il >= msa_dense:
            put(p + "indexer.q_proj.weight", mat(args.msa_bad_q_rows or ih * ik, D))
            put(p + "indexer.k_proj.weight", mat(ik, D))
            put(p + "indexer.q_norm.weight", norm(ik))
            put(p + "indexer.k_norm.weight", norm(ik))
    put("output_norm.weight", norm(D))
    if args.rope_freqs:   # as convert_hf_to_gguf writes for llama 3.1: 1 for fast dims, up to 8 for slow
        n_rot = args.rope_dim or Dh
        put("rope_freqs.weight", np.linspace(1.0, 8.0, n_rot // 2).astype(np.float32))
    if not args.tied:
        put("output.weight", mat(V, D), args.out_q)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dict(summary)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Write a tiny random-weight llama GGUF model.")
    ap.add_argument("out")
    ap.add_argument("--name", default="sightline-tiny-llama")
    ap.add_argument("--arch", choices=["llama", "qwen2", "gemma3", "minimax-m3"], default="llama",
                    help="qwen2: q/k/v biases, NEOX RoPE (Qwen2 / Qwen2.5); gemma3: its q/k norms, post norms, GELU, embedding scale and sliding window")
    ap.add_argument("--sliding-window", type=int, default=0, help="gemma3: attention.sliding_window")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--n-kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=0, help="default d_model / n_heads")
    ap.add_argument("--ffn", type=int, default=96)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--rope-dim", type=int, default=0, help="rope.dimension_count (default head_dim)")
    ap.add_argument("--rope-linear-factor", type=float, default=0.0,
                    help="write rope.scaling.type=linear with this factor")
    ap.add_argument("--rope-freqs", action="store_true",
                    help="write rope_freqs.weight (Llama 3.1's per-dimension frequency divisors, 1 to 8)")
    ap.add_argument("--eps", type=float, default=1e-5)
    t = ap.add_mutually_exclusive_group()
    t.add_argument("--tied", dest="tied", action="store_true", default=True,
                   help="no output.weight; logits use token_embd (default)")
    t.add_argument("--untied", dest="tied", action="store_false", help="write output.weight")
    ch = sorted(TYPE_NAMES)
    ap.add_argument("--wtype", choices=ch, default="f32", help="default type of all 2-D weights")
    ap.add_argument("--embd-type", choices=ch, help="token_embd.weight (default --wtype)")
    ap.add_argument("--out-type", choices=ch, help="output.weight (default --wtype)")
    ap.add_argument("--attn-type", choices=ch, help="attn_q/k/v/output (default --wtype)")
    ap.add_argument("--ffn-type", choices=ch, help="ffn_gate/up/down (default --wtype)")
    ap.add_argument("--mix", choices=["q4_k_m"],
                    help="q4_k_m: llama.cpp's Q4_K_M mix (Q4_K; output, and attn_v / ffn_down in the "
                         "first and last eighth and every third layer, Q6_K); --wtype etc. are ignored")
    ap.add_argument("--experts", type=int, default=0,
                    help="routed experts (minimax-m3 default 4; with llama: a Mixtral-style MoE in every layer)")
    ap.add_argument("--experts-used", type=int, default=0, help="expert_used_count (default min(2, experts))")
    ap.add_argument("--expert-ffn", type=int, default=0, help="expert_feed_forward_length (default --ffn)")
    ap.add_argument("--shared-experts", type=int, default=None, help="minimax-m3: expert_shared_count (default 1)")
    ap.add_argument("--gating", choices=["sigmoid", "softmax"], default="sigmoid", help="minimax-m3 router")
    ap.add_argument("--gating-func", type=int, default=0, help="hostile files: raw expert_gating_func")
    ap.add_argument("--expert-weights-norm", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--expert-weights-scale", type=float, default=2.5)
    ap.add_argument("--no-probs-bias", action="store_true", help="minimax-m3: no exp_probs_b.bias")
    ap.add_argument("--bad-expert-used", type=int, default=0, help="hostile files: expert_used_count")
    ap.add_argument("--bad-expert-rows", type=int, default=0, help="hostile files: rows of ffn_gate_exps")
    ap.add_argument("--msa", action="store_true", help="add llama.-prefixed MSA indexer keys/tensors")
    ap.add_argument("--msa-heads", type=int, default=0, help="indexer.head_count (default n_kv_heads)")
    ap.add_argument("--msa-key-length", type=int, default=0, help="indexer.key_length (default head_dim)")
    ap.add_argument("--msa-top-k", type=int, default=4)
    ap.add_argument("--msa-block-size", type=int, default=16)
    ap.add_argument("--msa-local-blocks", type=int, default=1)
    ap.add_argument("--msa-dense-layers", type=int, default=1, help="leading_dense_block_count")
    ap.add_argument("--msa-bad-q-rows", type=int, default=0,
                    help="hostile files: rows of every indexer.q_proj (default head_count*key_length)")
    args = ap.parse_args(argv)
    if args.mix == "q4_k_m":
        args.wtype, args.embd_type, args.out_type, args.attn_type, args.ffn_type = "q4_k", "q4_k", "q6_k", None, None
    args.wtype_q = TYPE_NAMES[args.wtype]
    args.embd_q = TYPE_NAMES[args.embd_type or args.wtype]
    args.out_q = TYPE_NAMES[args.out_type or args.wtype]
    args.attn_q = TYPE_NAMES[args.attn_type or args.wtype]
    args.ffn_q = TYPE_NAMES[args.ffn_type or args.wtype]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    summary = build(args)
    print(f"wrote {args.out}: tensors by type {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
