#!/usr/bin/env python3
"""An independent reading of a CTranslate2 model.bin, for tst_ct2_model's real-model check.

    python ct2_dump.py MODEL.BIN OUT.json

Parses the file with struct + numpy, following CTranslate2's writer
(python/ctranslate2/specs/model_spec.py, _serialize), and writes
  {"version", "spec", "revision",
   "variables": [{"name", "shape", "dtype", "sum", "sumsq", "first"}...],   # file order
   "aliases": [[alias, target], ...]}
where sum / sumsq are float64 sums of the values converted to float (int8/int16 dequantized with
their "_scale" variable when there is one, value = q / scale, per row for int8; integer flags and
counts as they are) and first is the first value.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
NAMES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}


def main() -> None:
    data = open(sys.argv[1], "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals[0] if len(vals) == 1 else vals

    def string():
        nonlocal pos
        n = take("H")
        s = data[pos:pos + n]
        pos += n
        assert s[-1] == 0
        return s[:-1].decode("utf-8")

    version = take("I")
    spec = string()
    revision = take("I")
    raw = {}
    order = []
    for _ in range(take("I")):
        name = string()
        rank = take("B")
        shape = [take("I") for _ in range(rank)]
        dtype = take("B")
        nbytes = take("I")
        buf = data[pos:pos + nbytes]
        pos += nbytes
        if dtype == 5:
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=DTYPES[dtype])
        assert arr.size == int(np.prod(shape, dtype=np.int64)), name
        raw[name] = (shape, dtype, arr)
        order.append(name)
    aliases = []
    for _ in range(take("I")):
        a = string()
        aliases.append([a, string()])
    assert pos == len(data), "trailing bytes"

    out = []
    for name in order:
        shape, dtype, arr = raw[name]
        vals = arr.astype(np.float64)
        if dtype in (1, 2) and name + "_scale" in raw:
            scale = raw[name + "_scale"][2].astype(np.float64)
            rows = shape[0] if shape else 1
            vals = (vals.reshape(rows, -1) / (scale.reshape(-1, 1) if scale.size > 1 else scale)).ravel()
        out.append({"name": name, "shape": shape, "dtype": NAMES[dtype],
                    "sum": float(vals.sum()), "sumsq": float((vals * vals).sum()),
                    "first": float(vals[0]) if vals.size else 0.0})
    json.dump({"version": version, "spec": spec, "revision": revision, "variables": out,
               "aliases": aliases}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
