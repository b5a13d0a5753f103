#!/usr/bin/env python3
"""Cross-checks Sightline's dequantizers against the gguf Python package (an independent numpy
implementation of ggml's block formats): random raw blocks from quant_dump, dequantized by both.
Also checks our Q8_0 activation quantizer and Q5_0/Q5_1 weight quantizers against
gguf.quants.quantize where it is available.

Usage: quant_check.py QUANT_DUMP_EXE
Runs itself under $SIGHTLINE_VENV/bin/python (default ~/.cache/sightline/venv) when the current
Python lacks gguf; exits 77 (skipped) when neither has it.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf.quants as gq
    from gguf import GGMLQuantizationType as Q
except ImportError:
    cache = os.environ.get("SIGHTLINE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sightline")
    venv_python = os.path.join(os.environ.get("SIGHTLINE_VENV") or os.path.join(cache, "venv"), "bin", "python")
    if os.path.exists(venv_python) and not os.environ.get("QUANT_CHECK_REEXEC"):
        os.environ["QUANT_CHECK_REEXEC"] = "1"
        os.execv(venv_python, [venv_python] + sys.argv)
    print("SKIP: the gguf Python package is not installed (run scripts/setup.sh)")
    sys.exit(77)

TYPES = {"q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "q8_0": Q.Q8_0, "q2_k": Q.Q2_K,
         "q3_k": Q.Q3_K, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K, "iq4_nl": Q.IQ4_NL, "iq4_xs": Q.IQ4_XS}


def q5_values(raw: np.ndarray, qh_off: int) -> np.ndarray:
    """The 5-bit q values (n_blocks, 32) of raw Q5 blocks, read straight from the ggml layout."""
    qh = raw[:, qh_off:qh_off + 4].copy().view(np.uint32).reshape(-1, 1)
    qs = raw[:, qh_off + 4:qh_off + 20]
    lo = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)
    hi = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)
    return lo | (hi << 4)


def main() -> int:
    exe = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([exe, tmp, "97"], check=True)
        for name, qtype in TYPES.items():
            block_size, type_size = gq.GGML_QUANT_SIZES[qtype]
            raw = np.fromfile(os.path.join(tmp, name + ".bin"), dtype=np.uint8)
            ours = np.fromfile(os.path.join(tmp, name + ".f32"), dtype=np.float32)
            theirs = gq.dequantize(raw.reshape(-1, type_size), qtype).reshape(-1).astype(np.float32)
            if theirs.shape != ours.shape:
                print(f"FAIL {name}: {ours.size} values from us, {theirs.size} from gguf")
                failures += 1
                continue
            err = float(np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30))
            exact = int(np.sum(ours == theirs))
            ok = err < 1e-6
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {ours.size} values, {exact} bit-identical, "
                  f"normalized error {err:.2e}")

        src = np.fromfile(os.path.join(tmp, "q8_0_src.f32"), dtype=np.float32)
        ours_q = np.fromfile(os.path.join(tmp, "q8_0_ours.bin"), dtype=np.uint8)
        try:
            theirs_q = gq.quantize(src.reshape(-1, 32), Q.Q8_0).reshape(-1)
        except Exception as e:  # older gguf versions lack numpy quantizers
            print(f"skip q8_0 quantize: {e}")
        else:
            same = int(np.sum(ours_q == theirs_q))
            # numpy rounds half to even where ggml's C reference (and we) round half away from zero;
            # ties are rare with gaussian data, so allow a handful of one-step differences.
            diff = np.abs(ours_q.reshape(-1, 34)[:, 2:].view(np.int8).astype(np.int32) -
                          theirs_q.reshape(-1, 34)[:, 2:].view(np.int8).astype(np.int32))
            scales_same = np.array_equal(ours_q.reshape(-1, 34)[:, :2], theirs_q.reshape(-1, 34)[:, :2])
            ok = scales_same and diff.max() <= 1 and int(np.sum(diff)) <= 4
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} q8_0 quantize: {same}/{ours_q.size} bytes identical, "
                  f"scales identical: {scales_same}, max q difference {int(diff.max())}")

        # Our Q5 weight quantizers against gguf's: same f16 scales (and mins); q may differ by one
        # step at rounding ties (gguf's Q5_0 rounds in float64, ggml's C reference and we in float32).
        src = np.fromfile(os.path.join(tmp, "q5_src.f32"), dtype=np.float32)
        for name, qtype, type_size, head in (("q5_0", Q.Q5_0, 22, 2), ("q5_1", Q.Q5_1, 24, 4)):
            ours_q = np.fromfile(os.path.join(tmp, name + "_ours.bin"), dtype=np.uint8).reshape(-1, type_size)
            try:
                theirs_q = gq.quantize(src.reshape(-1, 32), qtype).reshape(-1, type_size)
            except Exception as e:  # older gguf versions lack numpy quantizers
                print(f"skip {name} quantize: {e}")
                continue
            scales_same = np.array_equal(ours_q[:, :head], theirs_q[:, :head])
            diff = np.abs(q5_values(ours_q, head) - q5_values(theirs_q, head))
            same = int(np.sum(ours_q == theirs_q))
            ok = scales_same and diff.max() <= 1 and int(np.sum(diff)) <= 4
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} quantize: {same}/{ours_q.size} bytes identical, "
                  f"scales identical: {scales_same}, max q difference {int(diff.max())}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
