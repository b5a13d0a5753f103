#!/usr/bin/env python3
"""Writes a copy of a llama-architecture GGUF that keeps only its first N transformer blocks.

The device machine has no network and a call carries at most 64 MiB, so the 98 MB default model
cannot travel whole; its first blocks (real weights, the real tokenizer) can. tst_cuda_model and
bench_cuda_msa compare the device with the CPU engine on the same file, which stays a fair
comparison on fewer blocks. Needs the `gguf` package (scripts/setup.sh puts it in the venv).

usage: truncate_gguf.py IN.gguf OUT.gguf N_BLOCKS
"""
import sys

from gguf import GGUFReader, GGUFWriter, GGUFValueType


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    r = GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    count_key = f"{arch}.block_count"
    n_blocks = int(r.fields[count_key].parts[-1][0])
    if not 0 < keep <= n_blocks:
        print(f"truncate_gguf: {src}: has {n_blocks} blocks, cannot keep {keep}", file=sys.stderr)
        return 1
    w = GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == count_key:
            w.add_uint32(count_key, keep)
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == GGUFValueType.STRING:
                val = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(name, val, vtype, sub_type=sub)
        elif vtype == GGUFValueType.STRING:
            w.add_key_value(name, bytes(field.parts[-1]).decode("utf-8", errors="surrogateescape"), vtype)
        else:
            w.add_key_value(name, field.parts[-1].tolist()[0], vtype)
    kept = 0
    for t in r.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= keep:
            continue
        # t.data holds a quantized tensor's rows as bytes; raw_dtype keeps its type.
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        kept += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"truncate_gguf: {dst}: {keep} of {n_blocks} blocks, {kept} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
