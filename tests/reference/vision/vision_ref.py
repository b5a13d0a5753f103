#!/usr/bin/env python3
"""Independent numpy reference of the Idefics3 / SmolVLM and Gemma 3 vision towers (mmproj GGUF).

    python vision_ref.py MMPROJ --tile TILE.f32 --out EMB.f32 [--features-out F.f32] [--dtype f32|f64]
    python vision_ref.py MMPROJ --image RGB.u8 --width W --height H --out EMB.f32
                         [--longest-edge N] [--tiles-out TILES.f32]

--tile: one normalized tile, raw little-endian float32 (3, S, S). --image: raw 8-bit RGB,
interleaved, row-major (H, W, 3); the reference then plans tiles, resamples, normalizes (as
described below) and encodes every tile. Output: raw float32 embeddings (n_tiles * T, E), tiles
in plan order (row-major, global last). Prints one JSON line: the plan and shapes.

Weights are read with gguf.GGUFReader and dequantized with gguf.quants.dequantize (not ours).

Forward (Hugging Face's Idefics3VisionTransformer + Idefics3Connector, as llama.cpp's clip graph):
    patches = unfold(tile, P)         (N, 3*P*P) flattened (c, ky, kx); patch index py*g + px
    x = patches @ Wpe^T + bpe + pos   conv2d(kernel=stride=P) as a matmul
    per block: x += out(attn(ln1(x))), attn = softmax(q k^T / sqrt(hd)) v per head, no mask
               x += down(gelu_tanh(up(ln2(x))))
    x = post_ln(x)
    pixel_shuffle(x, s): HF's view/permute sequence, written out literally below
    out = x @ Wfc^T                   (no bias)
Gemma 3 (clip.projector_type = "gemma3", Hugging Face's Gemma3MultiModalProjector): the same ViT,
then the (g, g) patch grid average-pooled k x k (k = projector.scale_factor, default 4), Gemma's
RMS norm x / sqrt(mean(x^2) + eps) * w (the file's w already holds 1 + weight), and x @ W with W
= mm.input_projection.weight as stored, (D, E). One tile per image (no tiling).
Older converters named fc1 "ffn_down" and fc2 "ffn_up"; recognised by shape (as llama.cpp does).
LayerNorm uses the biased variance. GELU is the tanh approximation (SigLIP's
gelu_pytorch_tanh).

Preprocessing: Idefics3ImageProcessor's plan (longest edge -> L with the short edge truncated then
made even; edges up to multiples of S; rows x cols tiles of S plus a global S x S tile when larger
than S; L = clip.vision.preproc_image_size or --longest-edge, 0 = one global tile). Resampling is a
separable triangle filter, support widened by the downscale factor, PIL-BILINEAR style, written
here as dense per-axis weight matrices. Normalization (v / 255 - mean) / std.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import math
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


class Mmproj:
    def __init__(self, path: str, dtype=np.float32):
        self.r = gguf.GGUFReader(path)
        self.dtype = dtype
        self.t = {t.name: t for t in self.r.tensors}

        def f(key, default=None):
            fld = self.r.fields.get(key)
            return default if fld is None else fld.contents()
        self.family = f("clip.projector_type")
        assert self.family in ("idefics3", "gemma3")
        self.S = int(f("clip.vision.image_size"))
        self.P = int(f("clip.vision.patch_size"))
        self.D = int(f("clip.vision.embedding_length"))
        self.F = int(f("clip.vision.feed_forward_length"))
        self.L = int(f("clip.vision.block_count"))
        self.H = int(f("clip.vision.attention.head_count"))
        self.eps = float(f("clip.vision.attention.layer_norm_epsilon"))
        self.mean = np.array(f("clip.vision.image_mean"), dtype=np.float64)
        self.std = np.array(f("clip.vision.image_std"), dtype=np.float64)
        self.s = int(f("clip.vision.projector.scale_factor", 4 if self.family == "gemma3" else None))
        self.longest = 0 if self.family == "gemma3" else int(f("clip.vision.preproc_image_size", 0))

    def w(self, name):
        t = self.t[name]
        arr = dequantize(t.data, t.tensor_type)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        return np.ascontiguousarray(arr.reshape(shape), dtype=self.dtype)


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def pixel_shuffle(x, s):
    """HF Idefics3Connector.pixel_shuffle, batch of 1."""
    seq, d = x.shape
    h = w = int(math.isqrt(seq))
    x = x.reshape(1, h, w, d)
    x = x.reshape(1, h, w // s, d * s)
    x = x.transpose(0, 2, 1, 3)
    x = x.reshape(1, w // s, h // s, d * s * s)
    x = x.transpose(0, 2, 1, 3)
    return x.reshape(seq // (s * s), d * s * s)


def vit(m: Mmproj, tile):
    S, P, D, H = m.S, m.P, m.D, m.H
    g = S // P
    hd = D // H
    t = tile.reshape(3, g, P, g, P).transpose(1, 3, 0, 2, 4).reshape(g * g, 3 * P * P)
    x = t @ m.w("v.patch_embd.weight").reshape(D, 3 * P * P).T + m.w("v.patch_embd.bias")
    x = x + m.w("v.position_embd.weight")
    for il in range(m.L):
        p = f"v.blk.{il}."
        h = layer_norm(x, m.w(p + "ln1.weight"), m.w(p + "ln1.bias"), m.eps)
        q = (h @ m.w(p + "attn_q.weight").T + m.w(p + "attn_q.bias")).reshape(-1, H, hd).transpose(1, 0, 2)
        k = (h @ m.w(p + "attn_k.weight").T + m.w(p + "attn_k.bias")).reshape(-1, H, hd).transpose(1, 0, 2)
        v = (h @ m.w(p + "attn_v.weight").T + m.w(p + "attn_v.bias")).reshape(-1, H, hd).transpose(1, 0, 2)
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hd).astype(m.dtype)
        a = np.exp(a - a.max(axis=-1, keepdims=True))
        a = a / a.sum(axis=-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(-1, D)
        x = x + o @ m.w(p + "attn_out.weight").T + m.w(p + "attn_out.bias")
        h = layer_norm(x, m.w(p + "ln2.weight"), m.w(p + "ln2.bias"), m.eps)
        fc1, fc2 = p + "ffn_up", p + "ffn_down"
        if m.w(fc1 + ".weight").shape == (D, m.F) and m.F != D:   # legacy names: fc1 stored as ffn_down
            fc1, fc2 = fc2, fc1
        u = gelu_tanh(h @ m.w(fc1 + ".weight").T + m.w(fc1 + ".bias"))
        x = x + u @ m.w(fc2 + ".weight").T + m.w(fc2 + ".bias")
    return layer_norm(x, m.w("v.post_ln.weight"), m.w("v.post_ln.bias"), m.eps)


def avg_pool(x, k):
    """HF Gemma3MultiModalProjector: (N, D) -> (D, g, g) -> AvgPool2d(k, k) -> ((g/k)^2, D)."""
    n, d = x.shape
    g = int(math.isqrt(n))
    grid = x.T.reshape(d, g // k, k, g // k, k)
    return grid.mean(axis=(2, 4)).reshape(d, -1).T


def encode_tile(m: Mmproj, tile):
    x = vit(m, tile.astype(m.dtype))
    if m.family == "gemma3":
        p = avg_pool(x, m.s)
        p = p / np.sqrt((p * p).mean(axis=-1, keepdims=True) + m.eps) * m.w("mm.soft_emb_norm.weight")
        return p @ m.w("mm.input_projection.weight")
    return pixel_shuffle(x, m.s) @ m.w("mm.model.fc.weight").T


# ----------------------------------------------------------------------------- preprocessing

def plan(S, L, width, height):
    """(resized_w, resized_h, rows, cols); rows = cols = 0 for the global tile alone."""
    if L == 0:
        return 0, 0, 0, 0
    w, h = width, height
    ar = w / h
    if w >= h:
        w = L
        h = int(w / ar)
        if h % 2:
            h += 1
    else:
        h = L
        w = int(h * ar)
        if w % 2:
            w += 1
    w, h = max(w, 1), max(h, 1)
    ar = w / h
    if w >= h:
        w = math.ceil(w / S) * S
        h = int(w / ar)
        h = math.ceil(max(h, 1) / S) * S
    else:
        h = math.ceil(h / S) * S
        w = int(h * ar)
        w = math.ceil(max(w, 1) / S) * S
    if w > S or h > S:
        return w, h, h // S, w // S
    return 0, 0, 0, 0


def axis_matrix(n_in, n_out):
    """(n_out, n_in) triangle-filter weights, PIL BILINEAR style."""
    scale = n_in / n_out
    fs = max(scale, 1.0)
    support = fs
    M = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = (i + 0.5) * scale
        x0 = max(int(c - support + 0.5), 0)
        x1 = min(int(c + support + 0.5), n_in)
        xs = np.arange(x0, x1)
        t = np.abs((xs - c + 0.5) / fs)
        wts = np.where(t < 1.0, 1.0 - t, 0.0)
        if wts.sum() > 0:
            wts = wts / wts.sum()
        M[i, x0:x1] = wts
    return M


def resample(img, dw, dh):
    """img (h, w, 3) float64 -> (dh, dw, 3)."""
    h, w, _ = img.shape
    My, Mx = axis_matrix(h, dh), axis_matrix(w, dw)
    return np.einsum("yh,hwc,xw->yxc", My, img, Mx)


def tiles_of(m: Mmproj, rgb, L):
    S = m.S
    H_, W_, _ = rgb.shape
    rw, rh, rows, cols = plan(S, L, W_, H_)
    img = rgb.astype(np.float64)

    def norm(t):
        t = (t.astype(np.float32) / np.float32(255.0) - m.mean.astype(np.float32)) / m.std.astype(np.float32)
        return t.transpose(2, 0, 1)
    out = []
    if rows:
        big = resample(img, rw, rh)
        for r in range(rows):
            for c in range(cols):
                out.append(norm(big[r * S:(r + 1) * S, c * S:(c + 1) * S]))
    out.append(norm(resample(img, S, S)))
    return (rw, rh, rows, cols), np.stack(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mmproj")
    ap.add_argument("--tile")
    ap.add_argument("--image")
    ap.add_argument("--width", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--longest-edge", type=int, default=-1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--features-out")
    ap.add_argument("--tiles-out")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    a = ap.parse_args(argv)
    m = Mmproj(a.mmproj, np.float32 if a.dtype == "f32" else np.float64)
    info = {}
    if a.tile:
        tiles = np.fromfile(a.tile, dtype=np.float32).reshape(1, 3, m.S, m.S)
    else:
        rgb = np.fromfile(a.image, dtype=np.uint8).reshape(a.height, a.width, 3)
        L = m.longest if a.longest_edge < 0 or m.family == "gemma3" else a.longest_edge
        p, tiles = tiles_of(m, rgb, L)
        info["plan"] = {"resized_width": p[0], "resized_height": p[1], "rows": p[2], "cols": p[3]}
    if a.tiles_out:
        tiles.astype(np.float32).tofile(a.tiles_out)
    embs = [encode_tile(m, t) for t in tiles]
    np.concatenate(embs).astype(np.float32).tofile(a.out)
    if a.features_out:
        vit(m, tiles[0].astype(m.dtype)).astype(np.float32).tofile(a.features_out)
    info.update({"tiles": int(len(tiles)), "tokens_per_tile": int(embs[0].shape[0]), "width": int(embs[0].shape[1])})
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
