#!/usr/bin/env python3
"""Independent numpy reference forward pass for llama-family GGUF decoders.

This is the oracle the C++ engine is tested against. It is deliberately
simple: every weight is dequantized once (with the `gguf` package's own
dequantizers, not ours) to a dense numpy array, and the whole sequence is
recomputed for every call (no KV cache). Pure Python + numpy + gguf.

Model (per llama.cpp's `llama` graph):

    x = token_embd[ids]
    for each layer:
        h  = rmsnorm(x) * attn_norm
        q, k, v = Wq h, Wk h, Wv h            (per head, head_dim = n_embd / n_head
                                                unless <arch>.attention.key_length says otherwise)
        q, k = rope(q), rope(k)               (see ROPE below)
        a  = softmax(q k^T / sqrt(head_dim) + causal mask) v   (GQA: query head h uses
                                                KV head h // (n_head / n_head_kv))
        x  = x + Wo a
        h  = rmsnorm(x) * ffn_norm
        x  = x + Wdown( silu(Wgate h) * Wup h )
    logits = W_out rmsnorm(x) * output_norm   (W_out = output.weight, or token_embd.weight when tied)

MIXTURE OF EXPERTS (files with <arch>.expert_count; llama.cpp's build_moe_ffn). In layers >=
leading_dense_block_count the FFN above becomes, per token:
    p      = softmax(Wr h) (Mixtral, llama arch) | sigmoid(Wr h) (minimax-m3, expert_gating_func 2)
    chosen = the expert_used_count largest of p + exp_probs_b.bias (bias only steers the choice)
    w      = p[chosen], renormalised (Mixtral always; M3 if expert_weights_norm), * expert_weights_scale
    ffn    = sum_j w_j Wdown_j( act(Wgate_j h) * Wup_j h ) + the shared expert's FFN of h (M3)
MiniMax-M3 also normalizes each q and k head (attn_q_norm/attn_k_norm), rotates the first n_rot
dims NeoX style, and every FFN's act is swiglu_oai: min(g, 7) sigmoid(1.702 min(g, 7)) (clip(u, +-7) + 1).

MSA NATIVE (--msa native; files with a MiniMax-M3 style indexer, /work/shared/MSA.md). Layers
>= <arch>.leading_dense_block_count replace the causal attention above by:
    iq = rope(rmsnorm_per_head(Wiq h) * indexer.q_norm)   (T, head_count, key_length)
    ik = rope(rmsnorm(Wik h) * indexer.k_norm)            (T, key_length), one key shared by all groups
    (h: the same normalized layer input as q/k; the main q/k's RoPE: same mode, n_rot, base)
  Queries are grouped like the engine groups them: the positions of one forward call that fall
  in one block of B tokens (--msa-calls gives the call sizes; default one call, i.e. prefill;
  calls of 1 are decode, where this is M3's per-token selection), except that the last query of
  a call is a group of its own (the query whose logits a call returns selects as in decode). For
  each group (query block qb)
  and KV group g (served by index head g):
    score(b) = max over the group's queries i and tokens j of block b of iq[i, g] . ik[j]
               (plain dot, no scale), for every block b < qb (fully visible);
    selected = {qb} + the top (top_k - 1) of those blocks by score (ties: lower b first);
    every query head of group g attends (softmax, scale 1/sqrt(head_dim), causal) over the tokens
    of the selected blocks only.

ROPE. llama.cpp's `llama_model_rope_type()` (src/llama.cpp / src/llama-model.cpp)
lists LLM_ARCH_LLAMA under LLAMA_ROPE_TYPE_NORM ("a normal RoPE, operating on
pairs of consecutive head values"), because convert_hf_to_gguf.py's
LlamaModel.permute() reorders the rows of the HF q_proj/k_proj weights
(reshape(n_head, 2, d/2, n_in).swapaxes(1, 2)) so that HF's rotate_half pairs
(i, i + d/2) become adjacent rows (2i, 2i+1). Hence, for arch "llama" the
GGUF weights must be rotated in NORMAL mode:

    for i in 0 .. n_rot/2-1:   theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factor_i
        (x[2i], x[2i+1]) <- (x[2i] cos - x[2i+1] sin,  x[2i] sin + x[2i+1] cos)

NEOX mode (qwen2, phi3, gemma, gptneox, ... — no permutation in the converter)
rotates the pairs (i, i + n_rot/2) with the same theta_i. Dims >= n_rot
(rope.dimension_count < head_dim) pass through unchanged in both modes.
freq_scale = 1/rope.scaling.factor for linear scaling (1 otherwise);
freq_factor_i comes from an optional `rope_freqs.weight` tensor (llama 3.1
style), 1 otherwise. YaRN / LongRoPE are not implemented and raise.

Precision: everything (matmuls, RMSNorm, RoPE angles, softmax) runs in the
chosen dtype, float32 by default or float64 with --dtype f64; softmax
subtracts the row max before exp. RoPE angles are computed in float64 and
cast. The float64 mode exists to bound the float32 rounding error.

CLI:
    python gguf_llama_ref.py MODEL --tokens 1,2,3 [--logits-out F.npy|F.bin]
                             [--greedy N] [--dtype f32|f64] [--text STR]
prints JSON: the top-5 (id, logit) of the last position, timing, and with
--greedy N the N greedy next ids (and their decoded text).
--logits-out F.bin writes all positions' logits as raw little-endian float32,
row-major, shape (n_tokens, n_vocab), no header; F.npy writes the same array
with numpy's .npy header.
"""
from __future__ import annotations

import os

# Keep BLAS modest on shared machines; callers can override via the environment.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize

SUPPORTED_TYPES = {QT.F32, QT.F16, QT.BF16, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.Q2_K, QT.Q3_K,
                   QT.Q4_K, QT.Q5_K, QT.Q6_K}

# Architectures whose GGUF q/k use NEOX rotation (pairs (i, i + n_rot/2)), taken from
# llama.cpp's llama_model_rope_type(). Everything llama-like not listed here that we
# accept uses NORMAL rotation (pairs (2i, 2i+1)).
# Only archs whose graph is exactly the one in forward() (plus optional q/k/v biases) are
# listed; use --rope-mode to force a mode for anything else.
ROPE_NORM_ARCHS = {"llama"}
ROPE_NEOX_ARCHS = {"qwen2", "gemma3", "minimax-m3"}
# Gemma 3's own tensors (llm_build_gemma3_iswa): per-head q/k norms and norms after the attention
# and the FFN; only that architecture may have them.
GEMMA3_TENSORS = ("attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm")
# Tensors that would change the graph (fused qkv, per-head q/k norms, MoE, ...): refuse them.
# (blk.N.indexer.* MSA tensors are used only with --msa native; dense attention ignores them.)
UNSUPPORTED_TENSORS = ("attn_qkv", "attn_q_norm", "attn_k_norm", "ffn_gate_inp", "ffn_gate_exps",
                       "attn_post_norm", "ffn_post_norm", "attn_output.bias", "ffn_gate_inp_shexp")
# Mixture-of-experts tensors (files with <arch>.expert_count: Mixtral-style llama, MiniMax-M3).
MOE_TENSORS = ("ffn_gate_inp", "ffn_gate_exps")
# MiniMax-M3 (llama.cpp's LLM_ARCH_MINIMAX_M3): per-head q/k norms, one head_dim vector each.
M3_TENSORS = ("attn_q_norm", "attn_k_norm")


def rope_mode_for_arch(arch: str) -> str:
    """'norm' (GPT-J style, adjacent pairs) or 'neox' (half-split pairs)."""
    if arch in ROPE_NORM_ARCHS:
        return "norm"
    if arch in ROPE_NEOX_ARCHS:
        return "neox"
    raise ValueError(f"unknown RoPE type for architecture {arch!r}; pass rope_mode explicitly")


# ----------------------------------------------------------------------------- loading

def _field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


@dataclass
class Hparams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rms_eps: float
    rope_base: float
    rope_freq_scale: float
    rope_mode: str
    n_ctx_train: int
    # MSA indexer (head_count 0: the file has none)
    idx_heads: int = 0
    idx_dim: int = 0
    idx_top_k: int = 0
    idx_block: int = 0
    idx_dense: int = 0
    # Gemma 3 (llama.cpp's LLM_ARCH_GEMMA3 hparams): every swa_pattern-th layer is global, the
    # others attend to the latest swa_window positions with RoPE base 10000 unscaled.
    embed_scale: float = 1.0
    attn_scale: float = 0.0        # 0: 1/sqrt(head_dim)
    gelu: bool = False
    swa_window: int = 0
    swa_pattern: int = 0
    rope_base_swa: float = 10000.0
    # Mixture of experts (expert_count 0: none). Layers >= moe_dense route each token to
    # n_expert_used experts: probabilities softmax or sigmoid of the router, chosen by probability
    # plus exp_probs_b.bias, weighted by probability (renormalised, scaled); plus a shared expert.
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    moe_dense: int = 0
    gating: str = "softmax"
    norm_w: bool = False
    w_scale: float = 0.0
    swiglu_oai: bool = False      # MiniMax-M3: every FFN is swiglu_oai (alpha 1.702, limit 7)

    def slides(self, il: int) -> bool:
        return self.swa_window > 0 and self.swa_pattern > 0 and il % self.swa_pattern < self.swa_pattern - 1


@dataclass
class MsaOptions:
    """Native MSA attention settings (defaults: the file's indexer metadata)."""
    top_k: int
    block: int
    dense_layers: int
    calls: list | None = None   # sizes of consecutive forward calls; the rest is one call


class GGUFModel:
    """Reads hyperparameters and lazily dequantizes (and caches) weights."""

    def __init__(self, path: str, dtype=np.float32, rope_mode: str | None = None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache: dict[str, np.ndarray] = {}
        r = self.reader
        arch = _field(r, "general.architecture")
        if arch is None:
            raise ValueError("general.architecture missing")
        a = arch + "."
        n_embd = int(_field(r, a + "embedding_length"))
        n_head = int(_field(r, a + "attention.head_count"))
        n_head_kv = int(_field(r, a + "attention.head_count_kv", n_head))
        head_dim = int(_field(r, a + "attention.key_length", n_embd // n_head))
        vlen = int(_field(r, a + "attention.value_length", head_dim))
        if vlen != head_dim:
            raise NotImplementedError("value_length != key_length is not supported")
        emb = self.tensors["token_embd.weight"]
        n_vocab = int(_field(r, a + "vocab_size", int(emb.shape[1])))

        scaling_type = _field(r, a + "rope.scaling.type")
        factor = _field(r, a + "rope.scaling.factor")
        if factor is None:  # older files: rope.scale_linear (implies linear)
            factor = _field(r, a + "rope.scale_linear")
        if scaling_type is None:
            scaling_type = "linear" if factor not in (None, 0.0, 1.0) else "none"
        if scaling_type in ("none", None):
            freq_scale = 1.0
        elif scaling_type == "linear":
            freq_scale = 1.0 / float(factor) if factor else 1.0
        else:
            raise NotImplementedError(
                f"RoPE scaling type {scaling_type!r} (e.g. YaRN, LongRoPE) is not implemented "
                "in this reference; only 'none' and 'linear' are")

        self.hp = Hparams(
            arch=arch,
            n_vocab=n_vocab,
            n_embd=n_embd,
            n_layer=int(_field(r, a + "block_count")),
            n_ff=int(_field(r, a + "feed_forward_length")),
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            n_rot=int(_field(r, a + "rope.dimension_count", head_dim)),
            rms_eps=float(_field(r, a + "attention.layer_norm_rms_epsilon", 1e-5)),
            rope_base=float(_field(r, a + "rope.freq_base", 10000.0)),
            rope_freq_scale=freq_scale,
            rope_mode=rope_mode or rope_mode_for_arch(arch),
            n_ctx_train=int(_field(r, a + "context_length", 0)),
            idx_heads=int(_field(r, a + "attention.indexer.head_count", 0)),
            idx_dim=int(_field(r, a + "attention.indexer.key_length", head_dim)),
            idx_top_k=int(_field(r, a + "attention.indexer.top_k", 16)),
            idx_block=int(_field(r, a + "attention.indexer.block_size", 128)),
            idx_dense=int(_field(r, a + "leading_dense_block_count", 0)),
        )
        if n_head % n_head_kv:
            raise ValueError("head_count must be a multiple of head_count_kv")
        if arch == "gemma3":
            hp = self.hp
            hp.embed_scale = float(np.sqrt(n_embd))
            hp.gelu = True
            hp.swa_window = int(_field(r, a + "attention.sliding_window", 0))
            hp.swa_pattern = 6
            hp.attn_scale = 1.0 / float(np.sqrt(n_embd / n_head if hp.n_layer == 62 else head_dim))
        hp = self.hp
        hp.n_expert = int(_field(r, a + "expert_count", 0))
        allowed = set(GEMMA3_TENSORS) if arch == "gemma3" else set()
        if arch == "minimax-m3":
            allowed |= set(M3_TENSORS)
            hp.swiglu_oai = True
        if hp.n_expert:
            allowed |= set(MOE_TENSORS)
            hp.n_expert_used = int(_field(r, a + "expert_used_count"))
            hp.n_ff_exp = int(_field(r, a + "expert_feed_forward_length", hp.n_ff))
            hp.moe_dense = int(_field(r, a + "leading_dense_block_count", 0))
            if arch == "minimax-m3":
                hp.gating = {1: "softmax", 2: "sigmoid"}[int(_field(r, a + "expert_gating_func", 2))]
                hp.norm_w = bool(_field(r, a + "expert_weights_norm", False))
                hp.w_scale = float(_field(r, a + "expert_weights_scale", 0.0))
            else:   # Mixtral in llama.cpp's llama graph: softmax, chosen weights renormalised
                hp.gating, hp.norm_w = "softmax", True
        banned = tuple(u for u in UNSUPPORTED_TENSORS + GEMMA3_TENSORS if u not in allowed)
        unsupported = sorted({n.split(".", 2)[-1] for n in self.tensors
                              if n.startswith("blk.") and any(u in n for u in banned)})
        if unsupported:
            raise NotImplementedError(f"tensors this reference does not model: {unsupported}")
        self.tied = "output.weight" not in self.tensors

    def weight(self, name: str) -> np.ndarray:
        """Dense weight as numpy, shape = reversed ggml dims ((n_out, n_in) for matrices)."""
        w = self._cache.get(name)
        if w is None:
            t = self.tensors[name]
            if t.tensor_type not in SUPPORTED_TYPES:
                raise NotImplementedError(f"{name}: tensor type {t.tensor_type.name} not supported")
            w = dequantize(t.data, t.tensor_type)
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            w = np.ascontiguousarray(w.reshape(shape), dtype=self.dtype)
            self._cache[name] = w
        return w

    def has(self, name: str) -> bool:
        return name in self.tensors

    # ------------------------------------------------------------------ vocab helpers
    def vocab(self) -> list[str]:
        if not hasattr(self, "_vocab"):
            self._vocab = list(_field(self.reader, "tokenizer.ggml.tokens", []))
        return self._vocab


# ----------------------------------------------------------------------------- math

def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return (x / np.sqrt(ms + x.dtype.type(eps))) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x / (x.dtype.type(1) + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (Gemma's gelu_pytorch_tanh; ggml_gelu)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3))).astype(x.dtype)


def swiglu_oai(g: np.ndarray, u: np.ndarray, alpha: float = 1.702, limit: float = 7.0) -> np.ndarray:
    g = np.minimum(g, limit)
    u = np.clip(u, -limit, limit)
    return g / (1.0 + np.exp(-alpha * g)) * (u + 1.0)


def moe_ffn(model: "GGUFModel", p: str, h: np.ndarray, act, mm) -> np.ndarray:
    """The mixture of experts of layer prefix p for rows h (T, n_embd), token by token."""
    hp = model.hp
    W = model.weight
    logits = mm(h, p + "ffn_gate_inp.weight")                        # (T, E)
    if hp.gating == "softmax":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
    else:
        probs = 1.0 / (1.0 + np.exp(-logits))
    choice = probs + W(p + "exp_probs_b.bias") if model.has(p + "exp_probs_b.bias") else probs
    chosen = np.argsort(-choice, axis=1, kind="stable")[:, :hp.n_expert_used]   # ties: lower id
    weights = np.take_along_axis(probs, chosen, axis=1)
    if hp.norm_w:
        weights = weights / np.maximum(weights.sum(axis=1, keepdims=True), 6.103515625e-5)
    if hp.w_scale not in (0.0, 1.0):
        weights = weights * hp.w_scale
    gate, up, down = W(p + "ffn_gate_exps.weight"), W(p + "ffn_up_exps.weight"), W(p + "ffn_down_exps.weight")
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        for j, ex in enumerate(chosen[t]):
            y = act(gate[ex] @ h[t], up[ex] @ h[t]) @ down[ex].T
            out[t] += weights[t, j] * y
    if model.has(p + "ffn_gate_shexp.weight"):
        out = out + mm(act(mm(h, p + "ffn_gate_shexp.weight"), mm(h, p + "ffn_up_shexp.weight")),
                       p + "ffn_down_shexp.weight")
    return out


def rope_cos_sin(positions: np.ndarray, n_rot: int, base: float, freq_scale: float,
                 freq_factors: np.ndarray | None, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of shape (T, n_rot/2); angle_i = pos*freq_scale*base^(-2i/n_rot)/factor_i."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors.astype(np.float64)[: n_rot // 2]
    ang = np.outer(positions.astype(np.float64) * freq_scale, inv_freq)
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, n_rot: int, mode: str) -> np.ndarray:
    """x: (T, H, D). Rotates the first n_rot dims of each head; the rest pass through."""
    out = x.copy()
    c = cos[:, None, :]
    s = sin[:, None, :]
    if mode == "norm":      # pairs (2i, 2i+1)
        x0 = x[..., 0:n_rot:2]
        x1 = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * c - x1 * s
        out[..., 1:n_rot:2] = x0 * s + x1 * c
    elif mode == "neox":    # pairs (i, i + n_rot/2)
        h = n_rot // 2
        x0 = x[..., 0:h]
        x1 = x[..., h:n_rot]
        out[..., 0:h] = x0 * c - x1 * s
        out[..., h:n_rot] = x0 * s + x1 * c
    else:
        raise ValueError(f"bad rope mode {mode!r}")
    return out


def causal_gqa_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float = 0.0,
                         window: int = 0, bidirectional=()) -> np.ndarray:
    """q: (T, H, D), k/v: (T, Hkv, D) -> (T, H*D). Query head h uses KV head h // (H/Hkv).
    scale 0: 1/sqrt(D). window > 0: query i sees keys i - window + 1 .. i (sliding window).
    bidirectional: [a, b) spans whose positions also see the later positions of the same span
    (Gemma 3's image tokens, llama.cpp's non-causal image batch); the window still bounds the past."""
    T, H, D = q.shape
    Hkv = k.shape[1]
    g = H // Hkv
    kk = np.repeat(k, g, axis=1)          # (T, H, D): head h -> kv head h // g
    vv = np.repeat(v, g, axis=1)
    scale = q.dtype.type(scale or 1.0 / np.sqrt(D))
    s = np.einsum("thd,shd->hts", q, kk) * scale            # (H, T, T)
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)        # j > i is the future
    for a, b in bidirectional:
        mask[a:b, a:b] = False
    if window > 0:
        mask |= np.tril(np.ones((T, T), dtype=bool), k=-window)   # j <= i - window: out of the window
    s = np.where(mask[None], -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    o = np.einsum("hts,shd->thd", p, vv)                     # (T, H, D)
    return o.reshape(T, H * D)


def msa_query_groups(T: int, block: int, calls) -> list[tuple[int, int]]:
    """[start, end) query groups: the positions of one forward call inside one block."""
    groups = []
    sizes = list(calls or [])
    p = 0
    while p < T:
        e = min(T, p + sizes.pop(0)) if sizes else T
        s0 = p
        while s0 < e:
            b_end = min(e, (s0 // block + 1) * block)
            if b_end == e and e - s0 > 1:  # the call's last query selects on its own
                groups.append((s0, e - 1))
                groups.append((e - 1, e))
            else:
                groups.append((s0, b_end))
            s0 = b_end
        p = e
    return groups


def msa_native_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, iq: np.ndarray, ik: np.ndarray,
                         opts: MsaOptions, record: list | None = None) -> np.ndarray:
    """q: (T, H, D), k/v: (T, Hkv, D), iq: (T, Hkv, Di), ik: (T, Di) -> (T, H*D).

    Written as loops over query groups and KV groups, independently of the engine's code.
    record (optional) receives (q_pos0, n_queries, g, [selected blocks]) per selection."""
    T, H, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    B = opts.block
    scale = q.dtype.type(1.0 / np.sqrt(D))
    out = np.zeros_like(q)
    for s0, e in msa_query_groups(T, B, opts.calls):
        local = s0 // B
        m = min(max(opts.top_k - 1, 0), local)
        for g in range(Hkv):
            if m == local:
                chosen = list(range(local))
            elif m == 0:
                chosen = []
            else:
                rows = iq[s0:e, g, :]                                  # (nq, Di)
                keys = ik[: local * B].reshape(local, B, -1)           # (local, B, Di)
                sc = np.einsum("rd,bjd->brj", rows, keys).reshape(local, -1).max(axis=1)
                chosen = sorted(range(local), key=lambda b: (-float(sc[b]), b))[:m]
            blocks = sorted(chosen + [local])
            if record is not None:
                record.append((s0, e - s0, g, blocks))
            idx = np.concatenate([np.arange(b * B, min((b + 1) * B, e)) for b in blocks])
            qq = q[s0:e, g * G:(g + 1) * G, :]                         # (nq, G, D)
            s = np.einsum("tgd,jd->gtj", qq, k[idx, g, :]) * scale      # (G, nq, nj)
            future = idx[None, :] > np.arange(s0, e)[:, None]          # (nq, nj)
            s = np.where(future[None], -np.inf, s)
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p = p / p.sum(axis=-1, keepdims=True)
            out[s0:e, g * G:(g + 1) * G, :] = np.einsum("gtj,jd->tgd", p, v[idx, g, :])
    return out.reshape(T, H * D)


def msa_options_for(model: "GGUFModel", top_k=None, block=None, dense_layers=None, calls=None) -> MsaOptions:
    hp = model.hp
    if hp.idx_heads == 0:
        raise ValueError(f"{model.path}: no MSA indexer (attention.indexer.head_count) for --msa native")
    if hp.idx_heads != hp.n_head_kv:
        raise ValueError(f"{model.path}: indexer.head_count {hp.idx_heads} != head_count_kv {hp.n_head_kv}")
    return MsaOptions(top_k=top_k or hp.idx_top_k, block=block or hp.idx_block,
                      dense_layers=hp.idx_dense if dense_layers is None else dense_layers, calls=calls)


# ----------------------------------------------------------------------------- forward

# Activation formats llama.cpp pairs with each weight type for its dot products: 8-bit blocks of 32
# (Q8_0 / Q8_1, the scale stored as f16) or 256 (Q8_K, f32 scale). Float weights keep f32 inputs.
_ACT_BLOCK = {
    QT.Q4_0: 32, QT.Q4_1: 32, QT.Q5_0: 32, QT.Q5_1: 32, QT.Q8_0: 32, QT.Q2_K: 256, QT.Q3_K: 256, QT.Q4_K: 256,
    QT.Q5_K: 256, QT.Q6_K: 256,
}


def fake_quant_q8(x: np.ndarray, block: int) -> np.ndarray:
    """x rounded the way llama.cpp quantizes activations to 8 bits (round half away from zero)."""
    shape = x.shape
    b = x.astype(np.float32).reshape(-1, block)
    amax = np.abs(b).max(axis=1, keepdims=True)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    q = np.trunc(b * inv + np.copysign(0.5, b))  # round half away from zero, as roundf
    if block == 32:
        d = d.astype(np.float16).astype(np.float32)  # the block stores d as f16
    return (q * d).reshape(shape).astype(x.dtype)


def forward(model: GGUFModel, tokens, positions=None, act_quant: bool = False, msa: MsaOptions | None = None,
            msa_record: dict | None = None, bidirectional=()) -> np.ndarray:
    """Logits for every position: (T, n_vocab) in model.dtype.

    msa: native MSA attention in layers >= msa.dense_layers (see MSA NATIVE above); msa_record
    (optional dict) receives each such layer's selections as msa_record[layer] = [(q_pos0,
    n_queries, group, blocks), ...].
    act_quant: round the input of every matmul as llama.cpp's 8-bit activation formats do, to
    separate the engine's rounding from its arithmetic when comparing quantized paths."""
    hp = model.hp
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("tokens must be a non-empty 1-D sequence")
    if ids.min() < 0 or ids.max() >= hp.n_vocab:
        raise ValueError(f"token id out of range [0, {hp.n_vocab})")
    T = ids.size
    pos = np.arange(T) if positions is None else np.asarray(positions)
    dt = model.dtype

    x = model.weight("token_embd.weight")[ids].astype(dt)    # (T, n_embd)
    if hp.embed_scale != 1.0:
        x = x * dt.type(hp.embed_scale)
    ff = model.weight("rope_freqs.weight") if model.has("rope_freqs.weight") else None
    cos_g, sin_g = rope_cos_sin(pos, hp.n_rot, hp.rope_base, hp.rope_freq_scale, ff, dt)
    cos_l, sin_l = rope_cos_sin(pos, hp.n_rot, hp.rope_base_swa, 1.0, ff, dt)

    def mm(h: np.ndarray, name: str) -> np.ndarray:
        block = _ACT_BLOCK.get(model.tensors[name].tensor_type) if act_quant else None
        return (fake_quant_q8(h, block) if block else h) @ model.weight(name).T

    for il in range(hp.n_layer):
        p = f"blk.{il}."
        W = model.weight
        slides = hp.slides(il)
        cos, sin = (cos_l, sin_l) if slides else (cos_g, sin_g)
        h = rmsnorm(x, W(p + "attn_norm.weight"), hp.rms_eps)
        q = mm(h, p + "attn_q.weight")
        k = mm(h, p + "attn_k.weight")
        v = mm(h, p + "attn_v.weight")
        if model.has(p + "attn_q.bias"):        # qwen2-style q/k/v biases (optional)
            q, k, v = q + W(p + "attn_q.bias"), k + W(p + "attn_k.bias"), v + W(p + "attn_v.bias")
        q = q.reshape(T, hp.n_head, hp.head_dim)
        k = k.reshape(T, hp.n_head_kv, hp.head_dim)
        v = v.reshape(T, hp.n_head_kv, hp.head_dim)
        if model.has(p + "attn_q_norm.weight"):  # gemma3, minimax-m3: RMSNorm of each head
            q = rmsnorm(q, W(p + "attn_q_norm.weight"), hp.rms_eps)
            k = rmsnorm(k, W(p + "attn_k_norm.weight"), hp.rms_eps)
        q = apply_rope(q, cos, sin, hp.n_rot, hp.rope_mode)
        k = apply_rope(k, cos, sin, hp.n_rot, hp.rope_mode)
        if msa is not None and il >= msa.dense_layers:
            if not model.has(p + "indexer.q_proj.weight"):
                raise ValueError(f"{model.path}: layer {il} has no indexer tensors for native MSA")
            iq = mm(h, p + "indexer.q_proj.weight").reshape(T, hp.idx_heads, hp.idx_dim)
            ik = mm(h, p + "indexer.k_proj.weight").reshape(T, 1, hp.idx_dim)
            iq = rmsnorm(iq, W(p + "indexer.q_norm.weight"), hp.rms_eps)   # per index head
            ik = rmsnorm(ik, W(p + "indexer.k_norm.weight"), hp.rms_eps)
            iq = apply_rope(iq, cos, sin, hp.n_rot, hp.rope_mode)
            ik = apply_rope(ik, cos, sin, hp.n_rot, hp.rope_mode)[:, 0, :]
            rec = [] if msa_record is not None else None
            a = msa_native_attention(q, k, v, iq, ik, msa, rec)
            if rec is not None:
                msa_record[il] = rec
        else:
            a = causal_gqa_attention(q, k, v, hp.attn_scale, hp.swa_window if slides else 0, bidirectional)
        o = mm(a.reshape(T, -1), p + "attn_output.weight")
        if model.has(p + "post_attention_norm.weight"):
            o = rmsnorm(o, W(p + "post_attention_norm.weight"), hp.rms_eps)
        x = x + o
        h = rmsnorm(x, W(p + "ffn_norm.weight"), hp.rms_eps)
        if hp.swiglu_oai:
            act = swiglu_oai
        elif hp.gelu:
            act = lambda g, u: gelu_tanh(g) * u   # noqa: E731
        else:
            act = lambda g, u: silu(g) * u        # noqa: E731
        if hp.n_expert and il >= hp.moe_dense:
            o = moe_ffn(model, p, h, act, mm)
        else:
            o = mm(act(mm(h, p + "ffn_gate.weight"), mm(h, p + "ffn_up.weight")), p + "ffn_down.weight")
        if model.has(p + "post_ffw_norm.weight"):
            o = rmsnorm(o, W(p + "post_ffw_norm.weight"), hp.rms_eps)
        x = x + o

    x = rmsnorm(x, model.weight("output_norm.weight"), hp.rms_eps)
    return mm(x, "token_embd.weight" if model.tied else "output.weight")


def greedy(model: GGUFModel, tokens, n: int, stop_ids=(), act_quant: bool = False,
           msa: MsaOptions | None = None) -> list[int]:
    """n greedy steps, recomputing the full sequence each step (reference, not fast). With msa,
    the prompt is one call (or msa.calls) and each generated token a decode call of 1."""
    seq = list(tokens)
    out = []
    for _ in range(n):
        step_msa = None
        if msa is not None:
            calls = list(msa.calls) if msa.calls else [len(tokens)]
            step_msa = MsaOptions(msa.top_k, msa.block, msa.dense_layers, calls + [1] * (len(seq) - len(tokens)))
        nxt = int(np.argmax(forward(model, seq, act_quant=act_quant, msa=step_msa)[-1]))
        out.append(nxt)
        seq.append(nxt)
        if nxt in stop_ids:
            break
    return out


def top_k(logits_row: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
    idx = np.argsort(-logits_row, kind="stable")[:k]
    return [(int(i), float(logits_row[i])) for i in idx]


# ----------------------------------------------------------------------------- GPT-2 byte-level vocab

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode char table."""
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


BYTE_TO_UNICODE = _bytes_to_unicode()
UNICODE_TO_BYTE = {c: b for b, c in BYTE_TO_UNICODE.items()}


def decode(vocab: list[str], ids) -> str:
    """GPT-2 byte-level decode: map each token's chars back to bytes (special tokens verbatim)."""
    out = bytearray()
    for i in ids:
        tok = vocab[i]
        if all(ch in UNICODE_TO_BYTE for ch in tok) and not (tok.startswith("<|") and tok.endswith("|>")):
            out.extend(UNICODE_TO_BYTE[ch] for ch in tok)
        else:
            out.extend(tok.encode("utf-8"))
    return out.decode("utf-8", errors="replace")


class SimpleBPE:
    """Convenience GPT-2 BPE encoder. Exact BPE merges by rank, but an approximate
    ASCII pre-tokenizer (no \\p{L} classes). Fine for plain English; token ids are the
    real contract with the C++ engine, not this."""

    PRETOK = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")

    def __init__(self, reader: gguf.GGUFReader):
        self.tokens = list(_field(reader, "tokenizer.ggml.tokens", []))
        merges = list(_field(reader, "tokenizer.ggml.merges", []))
        self.rank = {tuple(m.split(" ", 1)): i for i, m in enumerate(merges)}
        self.id = {t: i for i, t in enumerate(self.tokens)}
        types = _field(reader, "tokenizer.ggml.token_type", [])
        self.specials = sorted((t for t, ty in zip(self.tokens, types) if ty == 3),
                               key=len, reverse=True)

    def _bpe(self, word: str) -> list[str]:
        parts = list(word)
        while len(parts) > 1:
            best = min(range(len(parts) - 1),
                       key=lambda i: self.rank.get((parts[i], parts[i + 1]), 1 << 60))
            if (parts[best], parts[best + 1]) not in self.rank:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return parts

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        if self.specials:
            pat = "(" + "|".join(re.escape(s) for s in self.specials) + ")"
            chunks = re.split(pat, text)
        else:
            chunks = [text]
        for ch in chunks:
            if not ch:
                continue
            if ch in self.specials:
                ids.append(self.id[ch])
                continue
            for piece in self.PRETOK.findall(ch):
                u = "".join(BYTE_TO_UNICODE[b] for b in piece.encode("utf-8"))
                ids.extend(self.id[p] for p in self._bpe(u))
        return ids


# ----------------------------------------------------------------------------- CLI

def write_logits(path: str, logits: np.ndarray) -> None:
    arr = np.ascontiguousarray(logits, dtype="<f4")
    if path.endswith(".npy"):
        np.save(path, arr)
    else:
        arr.tofile(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", help="comma-separated token ids")
    src.add_argument("--text", help="text, encoded with the approximate SimpleBPE (convenience only)")
    ap.add_argument("--logits-out", help="all-position logits: .npy, or raw LE float32 (T, n_vocab) otherwise")
    ap.add_argument("--greedy", type=int, default=0, help="also print N greedy next token ids")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--rope-mode", choices=["norm", "neox"], help="override the arch-derived RoPE mode")
    ap.add_argument("--act-quant", action="store_true",
                    help="round matmul inputs like llama.cpp's 8-bit activation formats")
    ap.add_argument("--msa", choices=["dense", "native"], default="dense",
                    help="native: MSA with the file's indexer in layers >= leading_dense_block_count")
    ap.add_argument("--msa-top-k", type=int, help="override indexer.top_k")
    ap.add_argument("--msa-block-size", type=int, help="override indexer.block_size")
    ap.add_argument("--msa-dense-layers", type=int, help="override leading_dense_block_count")
    ap.add_argument("--msa-calls", help="comma-separated sizes of the engine's forward calls (query grouping)")
    ap.add_argument("--msa-selections", action="store_true", help="print each MSA layer's selections in the JSON")
    ap.add_argument("--bidirectional", action="append", default=[],
                    help="A:B: positions [A, B) attend to each other both ways (Gemma 3 image tokens)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    model = GGUFModel(args.model, np.float64 if args.dtype == "f64" else np.float32, args.rope_mode)
    if args.tokens is not None:
        ids = [int(s) for s in args.tokens.replace(" ", "").split(",") if s]
    else:
        ids = SimpleBPE(model.reader).encode(args.text)
    msa = None
    record = {} if args.msa_selections else None
    if args.msa == "native":
        calls = [int(c) for c in args.msa_calls.split(",") if c] if args.msa_calls else None
        msa = msa_options_for(model, args.msa_top_k, args.msa_block_size, args.msa_dense_layers, calls)
    t1 = time.perf_counter()
    spans = [tuple(int(v) for v in b.split(":")) for b in args.bidirectional]
    logits = forward(model, ids, act_quant=args.act_quant, msa=msa, msa_record=record, bidirectional=spans)
    t2 = time.perf_counter()
    res = {
        "model": os.path.basename(args.model),
        "arch": model.hp.arch,
        "rope_mode": model.hp.rope_mode,
        "dtype": args.dtype,
        "n_tokens": len(ids),
        "tokens": ids,
        "top5_last": top_k(logits[-1], 5),
        "seconds": {"load": round(t1 - t0, 3), "forward_incl_dequant": round(t2 - t1, 3)},
    }
    if msa is not None:
        res["msa"] = {"mode": "native", "top_k": msa.top_k, "block": msa.block, "dense_layers": msa.dense_layers}
    if record is not None:
        res["msa_selections"] = {str(layer): [[s0, n, g, blocks] for s0, n, g, blocks in sel]
                                 for layer, sel in record.items()}
    if args.logits_out:
        write_logits(args.logits_out, logits)
        res["logits_out"] = {"path": args.logits_out, "shape": list(logits.shape), "dtype": "float32 LE"}
    if args.greedy > 0:
        t3 = time.perf_counter()
        g = greedy(model, ids, args.greedy, act_quant=args.act_quant, msa=msa)
        res["greedy"] = g
        vocab = model.vocab()
        if vocab:
            res["greedy_text"] = decode(vocab, g)
        res["seconds"]["greedy"] = round(time.perf_counter() - t3, 3)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
