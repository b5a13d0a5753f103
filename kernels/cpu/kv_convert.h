// Row conversions of the paged KV cache (core/kvcache/kv_cache.h): symmetric int8 with one scale
// per row. f16 rows use convert.h. Pure and thread-safe.
#pragma once

#include <cstdint>

namespace sl::kernels {

// q (n) <- round(x / s) with s = max|x| / 127 (0 when x is all zeros); returns s.
float quantize_row_i8(int8_t* q, const float* x, int64_t n);
// out (n) <- q * s.
void dequantize_row_i8(float* out, const int8_t* q, float s, int64_t n);

}  // namespace sl::kernels
