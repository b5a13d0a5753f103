#include "kernels/cpu/kv_convert.h"

#include <algorithm>
#include <cmath>

namespace sl::kernels {

float quantize_row_i8(int8_t* q, const float* x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (!(amax > 0.0f) || !std::isfinite(amax)) {
        std::fill(q, q + n, int8_t{0});
        return amax > 0.0f ? amax : 0.0f;
    }
    const float s = amax / 127.0f;
    const float inv = 127.0f / amax;
    for (int64_t i = 0; i < n; ++i) {
        const float r = std::nearbyint(x[i] * inv);
        q[i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
    return s;
}

void dequantize_row_i8(float* out, const int8_t* q, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * s;
}

}  // namespace sl::kernels
