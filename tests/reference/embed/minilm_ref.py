#!/usr/bin/env python3
"""Independent reference for core/embed: Hugging Face `tokenizers` (tokenizer.json) for the ids and
a plain numpy BERT forward over model.safetensors (read here with json + numpy, no torch, no
safetensors package) for the sentence embeddings of all-MiniLM-L6-v2 as sentence-transformers
computes them: [CLS] text [SEP] cut to 256 tokens, mean pooling over the tokens, L2 normalisation.

    minilm_ref.py tokenize MODEL_DIR IN.json OUT.json   # IN: ["text", ...] -> OUT: [[ids], ...]
    minilm_ref.py embed    MODEL_DIR IN.json OUT.json   # -> {"ids": [[...]], "embeddings": [[384 floats]]}
    minilm_ref.py sweep    MODEL_DIR OUT.json           # per-code-point normalizer output, 0..0x10FFFF

Computation in float64 so that the reference's own rounding is negligible next to the engine's.
"""
import json
import math
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

MAX_TOKENS = 256


def load_tokenizer(model_dir):
    tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)  # sentence_bert_config.json: max_seq_length 256
    return tok


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(buf[base + b:base + e], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = arr.astype(np.float64) if info["dtype"] != "I64" else arr
    return out


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def forward(W, cfg, ids):
    n = len(ids)
    H = cfg["num_attention_heads"]
    d = cfg["hidden_size"]
    hd = d // H
    eps = cfg["layer_norm_eps"]
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:n] + \
        W["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l

        def lin(name, v):
            return v @ W[p + name + ".weight"].T + W[p + name + ".bias"]

        q = lin("attention.self.query", x).reshape(n, H, hd).transpose(1, 0, 2)
        k = lin("attention.self.key", x).reshape(n, H, hd).transpose(1, 0, 2)
        v = lin("attention.self.value", x).reshape(n, H, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, d)
        x = layer_norm(x + lin("attention.output.dense", ctx), W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], eps)
        h = gelu(lin("intermediate.dense", x))
        x = layer_norm(x + lin("output.dense", h), W[p + "output.LayerNorm.weight"],
                       W[p + "output.LayerNorm.bias"], eps)
    e = x.mean(0)
    return e / max(np.linalg.norm(e), 1e-12)


def main():
    mode, model_dir = sys.argv[1], sys.argv[2]
    tok = load_tokenizer(model_dir)
    if mode == "sweep":
        norm = tok.normalizer
        out = {}
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            s = norm.normalize_str(chr(cp))
            if s != chr(cp):
                out["%X" % cp] = s
        with open(sys.argv[3], "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=True)
        return
    with open(sys.argv[3], encoding="utf-8") as f:
        texts = json.load(f)
    ids = [e.ids for e in tok.encode_batch(texts)]
    if mode == "tokenize":
        result = ids
    elif mode == "embed":
        with open(model_dir + "/config.json") as f:
            cfg = json.load(f)
        W = read_safetensors(model_dir + "/model.safetensors")
        result = {"ids": ids, "embeddings": [forward(W, cfg, i).tolist() for i in ids]}
    else:
        raise SystemExit("unknown mode " + mode)
    with open(sys.argv[4], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
