#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels {

namespace ref {

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
    const int64_t nb = n / kQK8_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
    const int64_t nb = n / kQK8_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK8_1; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            y[i].d = 0.0f;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            std::memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < kQK_K; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += y[i].qs[j * 16 + l];
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
    const int64_t nb = n / kQK4_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
            const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
            const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
    const int64_t nb = n / kQK4_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int j = 0; j < kQK4_1; ++j) {
            mn = std::min(mn, x[j]);
            mx = std::max(mx, x[j]);
        }
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        y[i].m = to_fp16(mn);
        for (int j = 0; j < kQK4_1 / 2; ++j) {
            const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - mn) * id + 0.5f)));
            const int q1 =
                std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - mn) * id + 0.5f)));
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

// ggml's quantize_row_q5_0_ref: d = max / -16 (max: the value of largest magnitude),
// q = min(31, (int8_t)(x / d + 16.5)).
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
    const int64_t nb = n / kQK5_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK5_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kQK5_0 / 2; ++j) {
            const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
            const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
            qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

// ggml's quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = (x - min) / d + 0.5 truncated
// (clamped to 31 here; ggml relies on the float math never reaching 32).
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
    const int64_t nb = n / kQK5_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_1) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int j = 0; j < kQK5_1; ++j) {
            mn = std::min(mn, x[j]);
            mx = std::max(mx, x[j]);
        }
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = to_fp16(d);
        y[i].m = to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < kQK5_1 / 2; ++j) {
            const int q0 = std::min(31, static_cast<int>(static_cast<uint8_t>((x[j] - mn) * id + 0.5f)));
            const int q1 = std::min(31, static_cast<int>(static_cast<uint8_t>((x[j + 16] - mn) * id + 0.5f)));
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
            qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

// Plain min/max fit of one 256-value super-block in 8 sub-blocks of 32 (value = d * sc * q - dmin * m,
// q in 0..nmax, mins <= 0), 6-bit scales and mins relative to the super-block's largest, packed as
// ggml packs them (Q4_K and Q5_K share this header). Writes the q values in element order to L.
static void fit_k_subblocks32(const float* x, int nmax, uint8_t* scales, uint16_t* d_out, uint16_t* dmin_out, uint8_t* L) {
    float sub_scales[8], mins[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        float mn = 0.0f, mx = -FLT_MAX;  // mins are kept <= 0, as ggml does
        for (int l = 0; l < 32; ++l) {
            mn = std::min(mn, x[32 * j + l]);
            mx = std::max(mx, x[32 * j + l]);
        }
        sub_scales[j] = (mx - mn) / static_cast<float>(nmax);
        mins[j] = -mn;
        max_scale = std::max(max_scale, sub_scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        // Round the scale up so that the largest value still fits in nmax steps.
        ls[j] = static_cast<uint8_t>(std::min(63, static_cast<int>(std::ceil(inv_scale * sub_scales[j]))));
        lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    }
    std::memset(scales, 0, kKScaleSize);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
            scales[j - 0] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
        }
    }
    *d_out = to_fp16(max_scale / 63.0f);
    *dmin_out = to_fp16(max_min / 63.0f);
    const float d = fp16(*d_out), dmin = fp16(*dmin_out);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        q4k_scale_min(j, scales, &sc, &m);
        const float dq = d * sc, dm = dmin * m;
        for (int l = 0; l < 32; ++l) {
            const int q = dq != 0.0f ? nearest_int((x[32 * j + l] + dm) / dq) : 0;
            L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, nmax));
        }
    }
}

void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        uint8_t L[kQK_K];
        fit_k_subblocks32(x, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < kQK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        uint8_t L[kQK_K];
        fit_k_subblocks32(x, 31, y[i].scales, &y[i].d, &y[i].dmin, L);
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        for (int J = 0; J < 4; ++J) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t lo = L[64 * J + l], hi = L[64 * J + 32 + l];
                y[i].qs[32 * J + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
                y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * J)) | ((hi >> 4) << (2 * J + 1)));
            }
        }
    }
}

// Min/max fit per sub-block of 16 (value = d * sc * q - dmin * m, q in 0..3, mins <= 0), 4-bit
// scales and mins relative to the super-block's largest.
void quantize_row_q2_K(const float* x, BlockQ2_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float sub_scales[16], mins[16];
        float max_scale = 0.0f, max_min = 0.0f;
        for (int g = 0; g < 16; ++g) {
            float mn = 0.0f, mx = -FLT_MAX;
            for (int l = 0; l < 16; ++l) {
                mn = std::min(mn, x[16 * g + l]);
                mx = std::max(mx, x[16 * g + l]);
            }
            sub_scales[g] = (mx - mn) / 3.0f;
            mins[g] = -mn;
            max_scale = std::max(max_scale, sub_scales[g]);
            max_min = std::max(max_min, mins[g]);
        }
        y[i].d = to_fp16(max_scale / 15.0f);
        y[i].dmin = to_fp16(max_min / 15.0f);
        const float d = fp16(y[i].d), dmin = fp16(y[i].dmin);
        int8_t L[kQK_K];
        for (int g = 0; g < 16; ++g) {
            const int ls = d > 0.0f ? std::min(15, static_cast<int>(std::ceil(sub_scales[g] / d))) : 0;
            const int lm = dmin > 0.0f ? std::min(15, nearest_int(mins[g] / dmin)) : 0;
            y[i].scales[g] = static_cast<uint8_t>(ls | (lm << 4));
            const float dq = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
            for (int l = 0; l < 16; ++l) {
                const int q = dq != 0.0f ? nearest_int((x[16 * g + l] + dm) / dq) : 0;
                L[16 * g + l] = static_cast<int8_t>(std::clamp(q, 0, 3));
            }
        }
        std::memset(y[i].qs, 0, sizeof y[i].qs);
        for (int e = 0; e < kQK_K; ++e) {
            const int h = e / 128, s = (e % 128) / 32, l = e % 32;
            y[i].qs[32 * h + l] |= static_cast<uint8_t>(L[e] << (2 * s));
        }
    }
}

// Symmetric fit per sub-block of 16 (value = d * sc * q, q in -4..3, sc a 6-bit scale stored + 32),
// scales relative to the super-block's largest.
void quantize_row_q3_K(const float* x, BlockQ3_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float sub_scales[16];
        float max_scale = 0.0f;
        for (int g = 0; g < 16; ++g) {
            float amax = 0.0f;
            for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
            sub_scales[g] = amax / 4.0f;
            max_scale = std::max(max_scale, sub_scales[g]);
        }
        y[i].d = to_fp16(max_scale / 31.0f);
        const float d = fp16(y[i].d);
        std::memset(y[i].scales, 0, sizeof y[i].scales);
        std::memset(y[i].qs, 0, sizeof y[i].qs);
        std::memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int g = 0; g < 16; ++g) {
            const int ls = d > 0.0f ? std::min(31, nearest_int(sub_scales[g] / d)) : 0;
            const int stored = ls + 32;  // 6 bits
            if (g < 8) y[i].scales[g] |= static_cast<uint8_t>(stored & 0xF);
            else y[i].scales[g - 8] |= static_cast<uint8_t>((stored & 0xF) << 4);
            y[i].scales[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
            const float dq = d * static_cast<float>(ls);
            for (int l = 0; l < 16; ++l) {
                const int e = 16 * g + l;
                const int q = dq != 0.0f ? std::clamp(nearest_int(x[e] / dq), -4, 3) : 0;
                const int u = q + 4;  // 0..7: low 2 bits in qs, bit 2 in hmask
                const int h = e / 128, s = (e % 128) / 32;
                y[i].qs[32 * h + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * s));
                y[i].hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
            }
        }
    }
}

// Symmetric fit per sub-block of 16 (value = d * sc * (q - 32), q in 0..63), 8-bit scales
// relative to the super-block's largest, packed as ggml packs them.
void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float scales[16];
        float max_scale = 0.0f;
        for (int g = 0; g < 16; ++g) {
            float amax = 0.0f;
            for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
            scales[g] = amax / 31.0f;
            max_scale = std::max(max_scale, scales[g]);
        }
        const float iscale = max_scale > 0.0f ? 127.0f / max_scale : 0.0f;
        for (int g = 0; g < 16; ++g) {
            y[i].scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
        }
        y[i].d = to_fp16(max_scale / 127.0f);
        const float d = fp16(y[i].d);
        uint8_t L[kQK_K];
        for (int g = 0; g < 16; ++g) {
            const float dq = d * y[i].scales[g];
            for (int l = 0; l < 16; ++l) {
                const int q = dq != 0.0f ? nearest_int(x[16 * g + l] / dq) : 0;
                L[16 * g + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
            }
        }
        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                             ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

}  // namespace ref

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::quantize_row_q8_0(x, y, n);
        case Isa::Avx2: return avx2::quantize_row_q8_0(x, y, n);
        case Isa::Scalar: break;
    }
    ref::quantize_row_q8_0(x, y, n);
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::quantize_row_q8_1(x, y, n);
        case Isa::Avx2: return avx2::quantize_row_q8_1(x, y, n);
        case Isa::Scalar: break;
    }
    ref::quantize_row_q8_1(x, y, n);
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::quantize_row_q8_K(x, y, n);
        case Isa::Avx2: return avx2::quantize_row_q8_K(x, y, n);
        case Isa::Scalar: break;
    }
    ref::quantize_row_q8_K(x, y, n);
}

void quantize_row(TensorType type, const float* x, void* dst, int64_t n) {
    const TensorTypeInfo info = tensor_type_info(type);
    if (info.name == nullptr || n < 0 || n % info.block_size != 0) {
        throw std::invalid_argument("quantize_row: " + std::to_string(n) + " values is not a whole number of " +
                                    (info.name ? info.name : "unknown-type") + " blocks");
    }
    switch (type) {
        case TensorType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
        case TensorType::F16: return f32_to_f16(static_cast<uint16_t*>(dst), x, static_cast<size_t>(n));
        case TensorType::BF16: {
            auto* out = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
            return;
        }
        case TensorType::Q4_0: return ref::quantize_row_q4_0(x, static_cast<BlockQ4_0*>(dst), n);
        case TensorType::Q4_1: return ref::quantize_row_q4_1(x, static_cast<BlockQ4_1*>(dst), n);
        case TensorType::Q5_0: return ref::quantize_row_q5_0(x, static_cast<BlockQ5_0*>(dst), n);
        case TensorType::Q5_1: return ref::quantize_row_q5_1(x, static_cast<BlockQ5_1*>(dst), n);
        case TensorType::Q8_0: return quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), n);
        case TensorType::Q8_1: return quantize_row_q8_1(x, static_cast<BlockQ8_1*>(dst), n);
        case TensorType::Q2_K: return ref::quantize_row_q2_K(x, static_cast<BlockQ2_K*>(dst), n);
        case TensorType::Q3_K: return ref::quantize_row_q3_K(x, static_cast<BlockQ3_K*>(dst), n);
        case TensorType::Q4_K: return ref::quantize_row_q4_K(x, static_cast<BlockQ4_K*>(dst), n);
        case TensorType::Q5_K: return ref::quantize_row_q5_K(x, static_cast<BlockQ5_K*>(dst), n);
        case TensorType::Q6_K: return ref::quantize_row_q6_K(x, static_cast<BlockQ6_K*>(dst), n);
        case TensorType::Q8_K: return quantize_row_q8_K(x, static_cast<BlockQ8_K*>(dst), n);
        default: break;
    }
    throw std::invalid_argument(std::string("quantize_row: no quantizer for type ") + info.name);
}

}  // namespace sl::kernels
