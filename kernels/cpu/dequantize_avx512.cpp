// AVX-512 dequantizers (dequantize.h): the plain 16-bit float types. The block types are left to
// the AVX2 tier (dequantization is off the decode path: matmul works on the blocks directly).
#include <immintrin.h>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"

namespace sl::kernels::avx512 {

bool dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
    switch (type) {
        case TensorType::F16: avx512::f16_to_f32(dst, static_cast<const uint16_t*>(src), static_cast<size_t>(n)); return true;
        case TensorType::BF16: avx512::bf16_to_f32(dst, static_cast<const uint16_t*>(src), static_cast<size_t>(n)); return true;
        default: return avx2::dequantize_row(type, src, dst, n);
    }
}

}  // namespace sl::kernels::avx512
