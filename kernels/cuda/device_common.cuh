// Device-side helpers shared by the .cu files (never included by host-only C++): warp and block
// reductions, bf16 packing, and the raw mma.sync / ldmatrix wrappers of the tensor-core kernels.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
// gid = lane / 4 and tig = lane % 4:
//   A (16x16, row-major), 4 regs of 2 x 16-bit: a0 = A[gid][2tig..+1], a1 = A[gid+8][2tig..+1],
//                                                a2 = A[gid][2tig+8..+9], a3 = A[gid+8][2tig+8..+9]
//   B (16x8, "col"),       2 regs of 2 x 16-bit: b0 = B[2tig..+1][gid], b1 = B[2tig+8..+9][gid]
//   C (16x8, f32),         4 floats:             c0,c1 = C[gid][2tig..+1], c2,c3 = C[gid+8][2tig..+1]
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace sl::cuda::dev {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}

// Sum over the block; every thread gets the result. blockDim.x a multiple of 32, <= 1024.
// `scratch` holds >= 32 floats; the call ends with a barrier-protected read, so back-to-back calls
// with the same scratch are safe.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < n_warps ? scratch[lane] : 0.0f;
    t = warp_sum(t);
    return t;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < n_warps ? scratch[lane] : -INFINITY;
    t = warp_max(t);
    return t;
}

// Two bf16 in one register: `lo` in the low half (the lower column / row index of a fragment pair).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo (low half), .y = hi
    return *reinterpret_cast<const uint32_t*>(&v);
}

// D = A * B + D, bf16 inputs, f32 accumulators (sm_80+).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 16-bit matrices from shared memory, transposed; lane L gives the row address of
// row L % 8 of matrix L / 8 (16-byte aligned).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                                  const void* smem_row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// Position remapping (msa.cuh, MsaRemap): the two dims of rotation pair i < rot_dim / 2 — adjacent
// (2i, 2i + 1) or NeoX halves (i, i + rot_dim / 2), as kernels::rope pairs them.
__device__ __forceinline__ int2 rope_pair(int i, int rot_dim, int style) {
    return style == 0 ? make_int2(2 * i, 2 * i + 1) : make_int2(i, i + rot_dim / 2);
}

// (x0, x1) rotated by the angle whose cosine and sine are c, s (the rope kernel's arithmetic).
__device__ __forceinline__ void rotate2(float& x0, float& x1, float c, float s) {
    const float a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    const float b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    x0 = a;
    x1 = b;
}

// Rotates `rows` rows of bf16 (pitch `ld` elements) in shared memory in place, every row by the
// angles cs (rot_dim / 2 pairs of cos, sin; global memory), all threads of the CTA taking part
// (the keys of one block, to k^ = R(-b*B) k). Callers sync before and after.
__device__ __forceinline__ void rotate_rows_bf16(__nv_bfloat16* tile, int rows, int ld, int rot_dim, int style,
                                                 const float* cs) {
    const int half = rot_dim / 2;
    for (int idx = threadIdx.x; idx < rows * half; idx += blockDim.x) {
        const int r = idx / half, i = idx % half;
        const int2 d = rope_pair(i, rot_dim, style);
        __nv_bfloat16* row = tile + r * ld;
        float x0 = __bfloat162float(row[d.x]), x1 = __bfloat162float(row[d.y]);
        rotate2(x0, x1, cs[2 * i], cs[2 * i + 1]);
        row[d.x] = __float2bfloat16_rn(x0);
        row[d.y] = __float2bfloat16_rn(x1);
    }
}

}  // namespace sl::cuda::dev
