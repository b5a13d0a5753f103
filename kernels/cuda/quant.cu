// Dequantization and quantized matrix-vector products. Each quantized type decodes one 32-value
// block at a time (load_block), shared by both kernels so they cannot disagree.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/quant.cuh"

namespace sl::cuda {

using kernels::TensorType;

namespace {

constexpr int kBlock = 32;  // values per decoded chunk (the block size of Q4_0 / Q4_1 / Q8_0)

__device__ __forceinline__ float half_bits(const uint8_t* p) {
    const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(h));
}

// Bytes of one 32-value chunk.
__host__ __device__ constexpr int chunk_bytes(TensorType t) {
    return t == TensorType::Q4_0 ? 18 : t == TensorType::Q4_1 ? 20 : t == TensorType::Q8_0 ? 34
         : t == TensorType::F32 ? 128 : 64;  // F16, BF16
}

// out[0..32) <- chunk `c` of a row starting at `row`. Q4_x nibbles: j < 16 low, j >= 16 high.
template <TensorType T>
__device__ __forceinline__ void load_block(const uint8_t* row, int64_t c, float (&out)[kBlock]) {
    const uint8_t* p = row + c * chunk_bytes(T);
    if constexpr (T == TensorType::Q4_0) {
        const float d = half_bits(p);
        const uint8_t* qs = p + 2;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            out[j] = __fmul_rn(static_cast<float>((qs[j] & 0x0F) - 8), d);
            out[j + 16] = __fmul_rn(static_cast<float>((qs[j] >> 4) - 8), d);
        }
    } else if constexpr (T == TensorType::Q4_1) {
        const float d = half_bits(p), m = half_bits(p + 2);
        const uint8_t* qs = p + 4;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            out[j] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] & 0x0F), d), m);
            out[j + 16] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] >> 4), d), m);
        }
    } else if constexpr (T == TensorType::Q8_0) {
        const float d = half_bits(p);
        const int8_t* qs = reinterpret_cast<const int8_t*>(p + 2);
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = __fmul_rn(static_cast<float>(qs[j]), d);
    } else if constexpr (T == TensorType::F16) {
        const __half* h = reinterpret_cast<const __half*>(p);
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = __half2float(h[j]);
    } else if constexpr (T == TensorType::BF16) {
        const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(p);
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = __bfloat162float(h[j]);
    } else {
        const float* f = reinterpret_cast<const float*>(p);
#pragma unroll
        for (int j = 0; j < 32; ++j) out[j] = f[j];
    }
}

template <typename O>
__device__ __forceinline__ O convert_out(float v) {
    if constexpr (sizeof(O) == 4) return v;
    else if constexpr (std::is_same_v<O, __half>) return __float2half_rn(v);
    else return __float2bfloat16_rn(v);
}

// One thread per 32-value chunk. The tail of a row needs no care: n is a whole number of chunks.
template <TensorType T, typename O>
__global__ void dequantize_kernel(const uint8_t* src, O* dst, int64_t n_chunks) {
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n_chunks;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v[kBlock];
        load_block<T>(src, c, v);
        O* o = dst + c * kBlock;
#pragma unroll
        for (int j = 0; j < kBlock; ++j) o[j] = convert_out<O>(v[j]);
    }
}

// One warp per weight row; lane l decodes chunks l, l + 32, ... and dots them with NT tokens.
template <TensorType T, int NT>
__global__ void matvec_kernel(const uint8_t* W, int64_t d, int64_t n, const float* X, float* Y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    if (row >= d) return;  // whole warps exit together (row is uniform across a warp)
    const int64_t n_chunks = n / kBlock;
    const uint8_t* wr = W + row * n_chunks * chunk_bytes(T);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int64_t c = lane; c < n_chunks; c += 32) {
        float w[kBlock];
        load_block<T>(wr, c, w);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float4* x4 = reinterpret_cast<const float4*>(X + t * n + c * kBlock);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < kBlock / 4; ++j) {
                const float4 xv = x4[j];
                s += w[4 * j] * xv.x + w[4 * j + 1] * xv.y + w[4 * j + 2] * xv.z + w[4 * j + 3] * xv.w;
            }
            acc[t] += s;
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = dev::warp_sum(acc[t]);
        if (lane == 0) Y[t * d + row] = s;
    }
}

unsigned chunk_grid(int64_t n_chunks) {
    const int64_t b = (n_chunks + 255) / 256;
    return static_cast<unsigned>(b < 65535 * 32 ? b : 65535 * 32);
}

template <TensorType T>
cudaError_t dequantize_t(const void* src, void* dst, OutType out, int64_t n, cudaStream_t stream) {
    const int64_t chunks = n / kBlock;
    const auto* s = static_cast<const uint8_t*>(src);
    switch (out) {
        case OutType::F32: dequantize_kernel<T, float><<<chunk_grid(chunks), 256, 0, stream>>>(s, static_cast<float*>(dst), chunks); break;
        case OutType::F16: dequantize_kernel<T, __half><<<chunk_grid(chunks), 256, 0, stream>>>(s, static_cast<__half*>(dst), chunks); break;
        case OutType::BF16: dequantize_kernel<T, __nv_bfloat16><<<chunk_grid(chunks), 256, 0, stream>>>(s, static_cast<__nv_bfloat16*>(dst), chunks); break;
    }
    return cudaGetLastError();
}

template <TensorType T>
cudaError_t matvec_t(const void* W, int64_t d, int64_t n, const float* X, int n_tokens, float* Y, cudaStream_t stream) {
    constexpr int kThreads = 256;  // 8 rows per CTA
    const int64_t blocks64 = (d * 32 + kThreads - 1) / kThreads;
    if (blocks64 > INT32_MAX) return cudaErrorInvalidValue;
    const unsigned blocks = static_cast<unsigned>(blocks64);
    const auto* w = static_cast<const uint8_t*>(W);
    for (int t0 = 0; t0 < n_tokens; t0 += 4) {
        const float* x = X + static_cast<int64_t>(t0) * n;
        float* y = Y + static_cast<int64_t>(t0) * d;
        switch (n_tokens - t0 >= 4 ? 4 : n_tokens - t0) {
            case 4: matvec_kernel<T, 4><<<blocks, kThreads, 0, stream>>>(w, d, n, x, y); break;
            case 3: matvec_kernel<T, 3><<<blocks, kThreads, 0, stream>>>(w, d, n, x, y); break;
            case 2: matvec_kernel<T, 2><<<blocks, kThreads, 0, stream>>>(w, d, n, x, y); break;
            default: matvec_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(w, d, n, x, y); break;
        }
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

}  // namespace

bool device_supports(TensorType type) {
    switch (type) {
        case TensorType::F32: case TensorType::F16: case TensorType::BF16:
        case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q8_0: return true;
        default: return false;
    }
}

cudaError_t dequantize(TensorType type, const void* src, void* dst, OutType out_type, int64_t n, cudaStream_t stream) {
    if (!device_supports(type) || n < 0 || n % kBlock || !src || !dst || !aligned(src, type == TensorType::F32 ? 4 : 2))
        return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    switch (type) {
        case TensorType::Q4_0: return dequantize_t<TensorType::Q4_0>(src, dst, out_type, n, stream);
        case TensorType::Q4_1: return dequantize_t<TensorType::Q4_1>(src, dst, out_type, n, stream);
        case TensorType::Q8_0: return dequantize_t<TensorType::Q8_0>(src, dst, out_type, n, stream);
        case TensorType::F16: return dequantize_t<TensorType::F16>(src, dst, out_type, n, stream);
        case TensorType::BF16: return dequantize_t<TensorType::BF16>(src, dst, out_type, n, stream);
        default: return dequantize_t<TensorType::F32>(src, dst, out_type, n, stream);
    }
}

cudaError_t matvec(TensorType type, const void* W, int64_t d, int64_t n, const float* X, int n_tokens, float* Y,
                   cudaStream_t stream) {
    if (!device_supports(type) || d < 0 || n <= 0 || n % kBlock || n_tokens < 0 || !W || !X || !Y ||
        !aligned(X, 16) || !aligned(W, type == TensorType::F32 ? 4 : 2))
        return cudaErrorInvalidValue;
    if (d == 0 || n_tokens == 0) return cudaSuccess;
    switch (type) {
        case TensorType::Q4_0: return matvec_t<TensorType::Q4_0>(W, d, n, X, n_tokens, Y, stream);
        case TensorType::Q4_1: return matvec_t<TensorType::Q4_1>(W, d, n, X, n_tokens, Y, stream);
        case TensorType::Q8_0: return matvec_t<TensorType::Q8_0>(W, d, n, X, n_tokens, Y, stream);
        case TensorType::F16: return matvec_t<TensorType::F16>(W, d, n, X, n_tokens, Y, stream);
        case TensorType::BF16: return matvec_t<TensorType::BF16>(W, d, n, X, n_tokens, Y, stream);
        default: return matvec_t<TensorType::F32>(W, d, n, X, n_tokens, Y, stream);
    }
}

}  // namespace sl::cuda
