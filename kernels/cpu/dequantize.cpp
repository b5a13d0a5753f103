#include "kernels/cpu/dequantize.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels {

namespace {

void deq_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
        const float d = fp16(x[i].d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
            y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void deq_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
        const float d = fp16(x[i].d), m = fp16(x[i].m);
        for (int j = 0; j < kQK4_1 / 2; ++j) {
            y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
            y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void deq_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
        const float d = fp16(x[i].d);
        for (int j = 0; j < kQK5_0; ++j) y[j] = static_cast<float>(q5_value(x[i].qs, x[i].qh, j) - 16) * d;
    }
}

void deq_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
        const float d = fp16(x[i].d), m = fp16(x[i].m);
        for (int j = 0; j < kQK5_1; ++j) y[j] = static_cast<float>(q5_value(x[i].qs, x[i].qh, j)) * d + m;
    }
}

void deq_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
        const float d = fp16(x[i].d);
        for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

void deq_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK8_1) {
        const float d = fp16(x[i].d);
        for (int j = 0; j < kQK8_1; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

void deq_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q = x[i].qs;
        const float d = fp16(x[i].d), dmin = fp16(x[i].dmin);
        for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            q4k_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            q4k_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

void deq_q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16(x[i].d), dmin = fp16(x[i].dmin);
        int8_t q[kQK_K];
        q2k_values(x[i].qs, q);
        for (int e = 0; e < kQK_K; ++e) {
            const uint8_t sc = x[i].scales[e / 16];
            y[e] = d * static_cast<float>(sc & 0xF) * static_cast<float>(q[e]) - dmin * static_cast<float>(sc >> 4);
        }
    }
}

void deq_q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16(x[i].d);
        int8_t sc[16], q[kQK_K];
        q3k_unpack_scales(x[i].scales, sc);
        q3k_values(x[i].qs, x[i].hmask, q);
        for (int e = 0; e < kQK_K; ++e) y[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(q[e]);
    }
}

void deq_q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        const float d = fp16(x[i].d), dmin = fp16(x[i].dmin);
        uint8_t sc[8], mn[8], q[kQK_K];
        q4k_unpack_scales(x[i].scales, sc, mn);
        q5k_values(x[i].qs, x[i].qh, q);
        for (int e = 0; e < kQK_K; ++e)
            y[e] = d * static_cast<float>(sc[e / 32]) * static_cast<float>(q[e]) - dmin * static_cast<float>(mn[e / 32]);
    }
}

void deq_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16(x[i].d);
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        for (int k = 0; k < kQK_K; k += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

void deq_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = fp16(x[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] & 0xF]);
            y[j + 16] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] >> 4]);
        }
    }
}

void deq_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16(x[i].d);
        for (int ib = 0; ib < kQK_K / 32; ++ib, y += 32) {
            const float dl = d * static_cast<float>(iq4xs_scale(x[i].scales_l, x[i].scales_h, ib));
            const uint8_t* q = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * static_cast<float>(kIq4nlValues[q[j] & 0xF]);
                y[j + 16] = dl * static_cast<float>(kIq4nlValues[q[j] >> 4]);
            }
        }
    }
}

void deq_q8_K(const BlockQ8_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
        for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
    }
}

void check(TensorType type, int64_t n) {
    const TensorTypeInfo info = tensor_type_info(type);
    if (!can_dequantize(type)) {
        throw std::invalid_argument(std::string("dequantize_row: no dequantizer for type ") +
                                    (info.name ? info.name : "unknown"));
    }
    if (n < 0 || n % info.block_size != 0) {
        throw std::invalid_argument("dequantize_row: " + std::to_string(n) + " values is not a whole number of " +
                                    info.name + " blocks of " + std::to_string(info.block_size));
    }
}

}  // namespace

bool can_dequantize(TensorType type) {
    switch (type) {
        case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q4_0:
        case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1: case TensorType::Q8_0:
        case TensorType::Q8_1: case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::Q4_K:
        case TensorType::Q5_K: case TensorType::Q6_K: case TensorType::Q8_K: case TensorType::IQ4_NL:
        case TensorType::IQ4_XS: return true;
        default: return false;
    }
}

namespace ref {

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
    check(type, n);
    const auto un = static_cast<size_t>(n);
    switch (type) {
        case TensorType::F32: std::memcpy(dst, src, un * sizeof(float)); return;
        case TensorType::F16: return ref::f16_to_f32(dst, static_cast<const uint16_t*>(src), un);
        case TensorType::BF16: return ref::bf16_to_f32(dst, static_cast<const uint16_t*>(src), un);
        case TensorType::Q4_0: return deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQK4_0);
        case TensorType::Q4_1: return deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / kQK4_1);
        case TensorType::Q5_0: return deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, n / kQK5_0);
        case TensorType::Q5_1: return deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, n / kQK5_1);
        case TensorType::Q8_0: return deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQK8_0);
        case TensorType::Q8_1: return deq_q8_1(static_cast<const BlockQ8_1*>(src), dst, n / kQK8_1);
        case TensorType::Q2_K: return deq_q2_K(static_cast<const BlockQ2_K*>(src), dst, n / kQK_K);
        case TensorType::Q3_K: return deq_q3_K(static_cast<const BlockQ3_K*>(src), dst, n / kQK_K);
        case TensorType::Q4_K: return deq_q4_K(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
        case TensorType::Q5_K: return deq_q5_K(static_cast<const BlockQ5_K*>(src), dst, n / kQK_K);
        case TensorType::Q6_K: return deq_q6_K(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K);
        case TensorType::Q8_K: return deq_q8_K(static_cast<const BlockQ8_K*>(src), dst, n / kQK_K);
        case TensorType::IQ4_NL: return deq_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n / 32);
        case TensorType::IQ4_XS: return deq_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n / kQK_K);
        default: break;
    }
}

}  // namespace ref

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
    check(type, n);
    switch (active_isa()) {
        case Isa::Avx512:
            if (avx512::dequantize_row(type, src, dst, n)) return;
            break;
        case Isa::Avx2:
            if (avx2::dequantize_row(type, src, dst, n)) return;
            break;
        case Isa::Scalar: break;
    }
    ref::dequantize_row(type, src, dst, n);
}

}  // namespace sl::kernels
