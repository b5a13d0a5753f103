#!/usr/bin/env python3
"""Dense attention baseline for bench_cuda_msa: PyTorch scaled_dot_product_attention on the flash
backend, on the shapes the MSA benchmark runs (64 q / 4 kv heads, dim 128, bf16):
  prefill: the last 4,096 queries of an N-token context (causal, lower-right aligned);
  decode:  one query against all N keys.
and decode once more replayed from a CUDA graph (no launch overhead: how a decode loop runs).
Writes "prefill N ms" / "decode N ms" / "decode-graph N ms" lines to OUT, or one "unavailable REASON" line; never fails
the run (a shape that fails is reported as a comment line).

usage: sdpa_bench.py OUT [N,N,...]
"""
import sys
import time


H, KV, D, CHUNK = 64, 4, 128, 4096


def measure(torch, SDPBackend, sdpa_kernel, n, phase):
    """Mean milliseconds of one SDPA call on the flash backend, and how GQA was expressed."""
    nq = min(CHUNK, n) if phase == "prefill" else 1
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(1, H, nq, D, device=dev, dtype=dt)
    k = torch.randn(1, KV, n, D, device=dev, dtype=dt)
    v = torch.randn(1, KV, n, D, device=dev, dtype=dt)
    mask = None
    if nq > 1:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(nq, n)

    def call(kk, vv, gqa):
        kwargs = {"enable_gqa": True} if gqa else {}
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, **kwargs)

    try:
        call(k, v, True)
        args, how = (k, v, True), "enable_gqa"
    except Exception:  # noqa: BLE001 - older torch, or flash without GQA: repeat K/V
        args, how = (k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1), False), \
            "K/V repeated to 64 heads"
        call(*args)
    reps = 2 if n >= (1 << 20) and phase == "prefill" else 5
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        call(*args)
    b.record()
    torch.cuda.synchronize()
    ms = a.elapsed_time(b) / reps
    graph_ms = None
    if phase == "decode":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call(*args)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call(*args)
        g.replay()
        torch.cuda.synchronize()
        a.record()
        for _ in range(20):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        graph_ms = a.elapsed_time(b) / 20
    return ms, graph_ms, how


def main():
    out_path = sys.argv[1]
    sizes = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "32768,131072,1048576").split(",")]
    with open(out_path, "w") as out:
        try:
            import torch
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except Exception as e:  # noqa: BLE001
            out.write(f"unavailable cannot import torch / torch.nn.attention ({e})\n")
            return
        if not torch.cuda.is_available():
            out.write("unavailable torch sees no CUDA device\n")
            return
        t_start = time.time()
        for n in sizes:
            for phase in ("prefill", "decode"):
                try:
                    ms, graph_ms, how = measure(torch, SDPBackend, sdpa_kernel, n, phase)
                    out.write(f"{phase} {n} {ms:.4f}\n# {phase} {n}: flash, {how}, torch {torch.__version__}\n")
                    if graph_ms is not None:
                        out.write(f"{phase}-graph {n} {graph_ms:.4f}\n")
                except Exception as e:  # noqa: BLE001
                    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                    out.write(f"# {phase} {n} failed: {msg}\n")
                torch.cuda.empty_cache()  # the tensors died with measure()'s frame
                out.flush()
        out.write(f"# sdpa_bench took {time.time() - t_start:.1f} s\n")


if __name__ == "__main__":
    main()
