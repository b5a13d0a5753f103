#!/usr/bin/env python3
"""Independent reference for core/tokenizer: Hugging Face `tokenizers` built from a GGUF file's
vocabulary and merges (read with the gguf package), with the pre-tokenizer HF uses for that model.

    encode_hf.py vocab  MODEL.gguf OUT.json           the tokenizer metadata, for the C++ test
    encode_hf.py encode MODEL.gguf IN.json OUT.json   ids of IN's cases, as HF computes them
    encode_hf.py pretok IN.json OUT.json              words of IN's cases under HF's splitting

IN.json:  {"cases": [{"text": str, "parse_special": bool}, ...], "bench": str (optional)}
OUT.json: {"ids": [[int, ...], ...], "tokenizers": version, "bench_tokens": n, "bench_seconds": s,
           "bench_para_tokens": n, "bench_para_seconds": s}  (bench: one call, then per paragraph)
pretok IN.json: {"cases": [{"text": str, "pre": "gpt2" | "smollm" | "llama-bpe" | "qwen2" | "minimax-m2"}, ...]}
pretok OUT.json: {"words": [[str, ...], ...]} (raw text, before the byte-level mapping)
Exits non-zero with a message on stderr when a package or the model is missing.
"""
import json
import sys
import time

try:
    import gguf
    import tokenizers
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:  # pragma: no cover
    sys.exit(f"encode_hf.py: {e}: run scripts/setup.sh (it installs gguf and tokenizers)")

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
          r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
# GPT-4o's o200k pattern, as MiniMax-M2/M3's tokenizer.json writes it (tokenizer.ggml.pre "minimax-m2").
O200K = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
         r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
         r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if t == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


def read_meta(path):
    r = gguf.GGUFReader(path)
    tokens = field(r, "tokenizer.ggml.tokens", [])
    return {
        "model": field(r, "tokenizer.ggml.model", ""),
        "pre": field(r, "tokenizer.ggml.pre", ""),
        "tokens": tokens,
        "token_types": field(r, "tokenizer.ggml.token_type", []),
        "scores": field(r, "tokenizer.ggml.scores", []),
        "merges": field(r, "tokenizer.ggml.merges", []),
        "bos_id": field(r, "tokenizer.ggml.bos_token_id", -1),
        "eos_id": field(r, "tokenizer.ggml.eos_token_id", -1),
        "eot_id": field(r, "tokenizer.ggml.eot_token_id", -1),
        "unk_id": field(r, "tokenizer.ggml.unknown_token_id", -1),
        "pad_id": field(r, "tokenizer.ggml.padding_token_id", -1),
        "add_bos": bool(field(r, "tokenizer.ggml.add_bos_token", False)),
        "add_eos": bool(field(r, "tokenizer.ggml.add_eos_token", False)),
        "add_space_prefix": bool(field(r, "tokenizer.ggml.add_space_prefix", False)),
        "chat_template": field(r, "tokenizer.chat_template", ""),
    }


def build_hf(meta):
    if meta["model"] != "gpt2":
        sys.exit(f"encode_hf.py: tokenizer model {meta['model']!r} is not byte-level BPE")
    pre = meta["pre"]
    vocab = {}
    for i, t in enumerate(meta["tokens"]):
        vocab.setdefault(t, i)
    merges = [tuple(m.split(" ", 1)) for m in meta["merges"]]
    # HF's tokenizer.json for these models: no unk token (unknown bytes vanish), and Llama 3 sets
    # ignore_merges.
    bpe = models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False,
                     ignore_merges=pre in ("llama-bpe", "llama3"))
    tk = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre in ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone"):
        # SmolLM2's tokenizer.json: Sequence[Digits(individual_digits), ByteLevel(use_regex)].
        seq = [pre_tokenizers.Digits(individual_digits=True),
               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    elif pre in ("llama-bpe", "llama3"):
        seq = [pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"), byte_level]
    elif pre == "qwen2":
        seq = [pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"), byte_level]
    else:
        seq = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    tk.pre_tokenizer = pre_tokenizers.Sequence(seq)
    tk.decoder = decoders.ByteLevel()
    types = meta["token_types"]
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(meta["tokens"], types) if ty == 3])
    tk.add_tokens([AddedToken(t, special=False, normalized=False)
                   for t, ty in zip(meta["tokens"], types) if ty == 4])
    return tk


def split_only(pre):
    """The splitting half of build_hf's pre-tokenizer, without the byte mapping."""
    pattern = {"llama-bpe": LLAMA3, "qwen2": QWEN2, "minimax-m2": O200K, "gpt-4o": O200K}.get(pre, GPT2)
    seq = [pre_tokenizers.Split(Regex(pattern), behavior="isolated")]
    if pre == "smollm":
        seq.insert(0, pre_tokenizers.Digits(individual_digits=True))
    return pre_tokenizers.Sequence(seq)


def main(argv):
    if len(argv) == 4 and argv[1] == "pretok":
        with open(argv[2], encoding="utf-8") as f:
            job = json.load(f)
        words = [[w for w, _ in split_only(c["pre"]).pre_tokenize_str(c["text"])]
                 for c in job["cases"]]
        with open(argv[3], "w", encoding="utf-8") as f:
            json.dump({"words": words}, f)
        return 0
    if len(argv) == 4 and argv[1] == "vocab":
        with open(argv[3], "w", encoding="utf-8") as f:
            json.dump(read_meta(argv[2]), f, ensure_ascii=True)
        return 0
    if len(argv) == 5 and argv[1] == "encode":
        tk = build_hf(read_meta(argv[2]))
        with open(argv[3], encoding="utf-8") as f:
            job = json.load(f)
        out = {"ids": [], "tokenizers": tokenizers.__version__}
        for case in job["cases"]:
            tk.encode_special_tokens = not case.get("parse_special", False)
            out["ids"].append(tk.encode(case["text"], add_special_tokens=False).ids)
        if job.get("bench"):
            tk.encode_special_tokens = True
            t0 = time.perf_counter()
            n = len(tk.encode(job["bench"], add_special_tokens=False).ids)
            out["bench_seconds"] = time.perf_counter() - t0
            out["bench_tokens"] = n
            paras = [p for p in job["bench"].split("\n\n") if p]
            t0 = time.perf_counter()
            n = sum(len(tk.encode(p, add_special_tokens=False).ids) for p in paras)
            out["bench_para_seconds"] = time.perf_counter() - t0
            out["bench_para_tokens"] = n
        with open(argv[4], "w", encoding="utf-8") as f:
            json.dump(out, f)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
