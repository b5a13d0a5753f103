#!/usr/bin/env python3
"""Independent reference for core/whisper/whisper_tokenizer: Hugging Face `tokenizers` loading the
model directory's tokenizer.json as it is.

    python tokenize_hf.py MODEL_DIR IN.json OUT.json

IN.json:  {"texts": [str, ...], "ids": [[int, ...], ...]}
OUT.json: {"encode": [[int, ...], ...]   ids of each text, add_special_tokens=False
           "decode": [str, ...]}         text of each id list, skip_special_tokens=True
"""
import json
import sys
from pathlib import Path

try:
    from tokenizers import Tokenizer
except ImportError as e:  # pragma: no cover
    sys.exit(f"tokenize_hf.py: {e}: run scripts/setup.sh (it installs tokenizers)")


def main() -> None:
    tok = Tokenizer.from_file(str(Path(sys.argv[1]) / "tokenizer.json"))
    cases = json.load(open(sys.argv[2], encoding="utf-8"))
    out = {
        "encode": [tok.encode(t, add_special_tokens=False).ids for t in cases["texts"]],
        "decode": [tok.decode(ids, skip_special_tokens=True) for ids in cases["ids"]],
    }
    json.dump(out, open(sys.argv[3], "w", encoding="utf-8"), ensure_ascii=False)


if __name__ == "__main__":
    main()
