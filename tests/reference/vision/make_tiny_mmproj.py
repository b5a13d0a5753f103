#!/usr/bin/env python3
"""Write tiny random-weight Idefics3 / SmolVLM or Gemma 3 vision projectors (mmproj GGUF) for tests.

    python make_tiny_mmproj.py OUT.gguf [--seed 0 --image-size 32 --patch-size 4 --embd 48
        --ffn 80 --layers 2 --heads 3 --scale 2 --out-embd 64 --eps 1e-6 --wtype f32|f16|q8_0
        --longest-edge 0]  [hostile options below]

The file mirrors what llama.cpp's converter writes for SmolVLM's mmproj (arch "clip",
clip.projector_type = "idefics3"): keys clip.has_vision_encoder, clip.vision.{image_size,
patch_size, embedding_length, feed_forward_length, block_count, attention.head_count,
attention.layer_norm_epsilon, image_mean, image_std, projector.scale_factor, projection_dim},
and tensors (numpy shapes; ggml dims are reversed):
  v.patch_embd.weight (D, 3, P, P)  v.patch_embd.bias (D)  v.position_embd.weight (N, D)
  v.blk.L.{ln1,ln2}.{weight,bias} (D)
  v.blk.L.attn_{q,k,v,out}.weight (D, D) + .bias (D)
  v.blk.L.ffn_up.weight (F, D) + .bias (F);  v.blk.L.ffn_down.weight (D, F) + .bias (D)
  v.post_ln.{weight,bias} (D)           mm.model.fc.weight (E, D*s*s)
--longest-edge N adds clip.vision.preproc_image_size = N (gguf-py's PREPROC_IMAGE_SIZE: tiling as
Idefics3's size.longest_edge).
--family gemma3 writes Gemma 3's projector instead (clip.projector_type = "gemma3", as llama.cpp's
converter): mm.soft_emb_norm.weight (D) holding 1 + w (the converter adds Gemma's +1) and
mm.input_projection.weight (D, E) (HF's parameter, used as x @ W); --scale is the average pool's
side, written as clip.vision.projector.scale_factor only when it is not 4 (as the converter does);
no preproc_image_size. --wtype sets the block matrices and the projector; the patch
embedding stays F16 when --wtype is a block type (its rows, 3*P*P, are rarely a multiple of 32),
vectors are F32, the position embedding follows --wtype when it is f16.

Hostile variants (for the loader's tests):
  --drop NAME            leave tensor NAME out
  --bad-shape NAME       write tensor NAME with one extra row
  --drop-key KEY         leave metadata KEY out
  --set-u32 KEY=VALUE    override (or add) an integer key, e.g. clip.vision.image_size=1000000
  --projector-type STR   another clip.projector_type
  --nan NAME             put a NaN into tensor NAME
  --legacy-ffn-names     write fc1 as ffn_down and fc2 as ffn_up (what older llama.cpp converters
                         wrote; loaders swap them back by shape)
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.quants import quantize

TYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--patch-size", type=int, default=4)
    ap.add_argument("--embd", type=int, default=48)
    ap.add_argument("--ffn", type=int, default=80)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--out-embd", type=int, default=64)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--wtype", choices=sorted(TYPES), default="f32")
    ap.add_argument("--longest-edge", type=int, default=0)
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--bad-shape", action="append", default=[])
    ap.add_argument("--drop-key", action="append", default=[])
    ap.add_argument("--set-u32", action="append", default=[])
    ap.add_argument("--family", choices=["idefics3", "gemma3"], default="idefics3")
    ap.add_argument("--projector-type")
    ap.add_argument("--nan", action="append", default=[])
    ap.add_argument("--legacy-ffn-names", action="store_true")
    a = ap.parse_args(argv)

    rng = np.random.default_rng(a.seed)
    S, P, D, F, L, H, s, E = a.image_size, a.patch_size, a.embd, a.ffn, a.layers, a.heads, a.scale, a.out_embd
    N = (S // P) ** 2
    wq = TYPES[a.wtype]
    w = gguf.GGUFWriter(a.out, "clip")

    overrides = dict(kv.split("=", 1) for kv in a.set_u32)
    keys = {
        "clip.vision.image_size": S, "clip.vision.patch_size": P, "clip.vision.embedding_length": D,
        "clip.vision.feed_forward_length": F, "clip.vision.block_count": L,
        "clip.vision.attention.head_count": H, "clip.vision.projector.scale_factor": s,
        "clip.vision.projection_dim": E,
    }
    gemma3 = a.family == "gemma3"
    if gemma3 and s == 4:
        del keys["clip.vision.projector.scale_factor"]
    if a.longest_edge:
        keys["clip.vision.preproc_image_size"] = a.longest_edge
    for k, v in overrides.items():
        keys[k] = int(v)
    if "clip.projector_type" not in a.drop_key:
        w.add_string("clip.projector_type", a.projector_type or a.family)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.use_gelu", True)
    for k, v in keys.items():
        if k not in a.drop_key:
            w.add_uint32(k, v)
    if "clip.vision.attention.layer_norm_epsilon" not in a.drop_key:
        w.add_float32("clip.vision.attention.layer_norm_epsilon", a.eps)
    if "clip.vision.image_mean" not in a.drop_key:
        w.add_array("clip.vision.image_mean", [0.5, 0.45, 0.4])
    if "clip.vision.image_std" not in a.drop_key:
        w.add_array("clip.vision.image_std", [0.5, 0.55, 0.6])

    def put(name, arr, qtype=QT.F32):
        if name in a.drop:
            return
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if name in a.bad_shape:
            arr = np.concatenate([arr, arr[:1]], axis=0)
        if name in a.nan:
            arr = arr.copy()
            arr.flat[0] = np.nan
        if qtype == QT.F32:
            w.add_tensor(name, arr)
        elif qtype == QT.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, quantize(arr, qtype), raw_dtype=qtype)

    def mat(n_out, n_in):
        return rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)

    def vec(n, scale=0.1, base=0.0):
        return base + scale * rng.standard_normal(n)

    patch_type = QT.F16 if wq not in (QT.F32, QT.F16) else wq
    put("v.patch_embd.weight", rng.standard_normal((D, 3, P, P)) / np.sqrt(3 * P * P), patch_type)
    put("v.patch_embd.bias", vec(D))
    put("v.position_embd.weight", 0.5 * rng.standard_normal((N, D)), QT.F16 if wq == QT.F16 else QT.F32)
    for il in range(L):
        p = f"v.blk.{il}."
        put(p + "ln1.weight", vec(D, 0.1, 1.0))
        put(p + "ln1.bias", vec(D))
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            put(p + t + ".weight", mat(D, D), wq)
            put(p + t + ".bias", vec(D))
        put(p + "ln2.weight", vec(D, 0.1, 1.0))
        put(p + "ln2.bias", vec(D))
        fc1, fc2 = ("ffn_down", "ffn_up") if a.legacy_ffn_names else ("ffn_up", "ffn_down")
        put(p + fc1 + ".weight", mat(F, D), wq)
        put(p + fc1 + ".bias", vec(F))
        put(p + fc2 + ".weight", mat(D, F), wq)
        put(p + fc2 + ".bias", vec(D))
    put("v.post_ln.weight", vec(D, 0.1, 1.0))
    put("v.post_ln.bias", vec(D))
    if gemma3:
        put("mm.soft_emb_norm.weight", vec(D, 0.1, 1.0))
        put("mm.input_projection.weight", mat(E, D).T, wq)
    else:
        put("mm.model.fc.weight", mat(E, D * s * s), wq)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {a.family}, {S}px tiles, {P}px patches, D={D}, {L} layers, {H} heads, scale {s}, E={E}, {a.wtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
