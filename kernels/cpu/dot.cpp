#include "kernels/cpu/dot.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels {

namespace {

// The reference kernels: one activation row at a time, ggml's integer-exact block sums.
float dot_q4_0(int64_t n, const BlockQ4_0* x, const BlockQ8_0* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / kQK4_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < kQK4_0 / 2; ++j) {
            sumi += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j] + ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        }
        sumf += static_cast<float>(sumi) * (fp16(x[ib].d) * fp16(y[ib].d));
    }
    return sumf;
}

float dot_q4_1(int64_t n, const BlockQ4_1* x, const BlockQ8_1* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / kQK4_1; ++ib) {
        int sumi = 0;
        for (int j = 0; j < kQK4_1 / 2; ++j) {
            sumi += (x[ib].qs[j] & 0x0F) * y[ib].qs[j] + (x[ib].qs[j] >> 4) * y[ib].qs[j + 16];
        }
        sumf += (fp16(x[ib].d) * fp16(y[ib].d)) * static_cast<float>(sumi) + fp16(x[ib].m) * fp16(y[ib].s);
    }
    return sumf;
}

float dot_q5_0(int64_t n, const BlockQ5_0* x, const BlockQ8_0* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / kQK5_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < kQK5_0; ++j) sumi += (q5_value(x[ib].qs, x[ib].qh, j) - 16) * y[ib].qs[j];
        sumf += static_cast<float>(sumi) * (fp16(x[ib].d) * fp16(y[ib].d));
    }
    return sumf;
}

float dot_q5_1(int64_t n, const BlockQ5_1* x, const BlockQ8_1* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / kQK5_1; ++ib) {
        int sumi = 0;
        for (int j = 0; j < kQK5_1; ++j) sumi += q5_value(x[ib].qs, x[ib].qh, j) * y[ib].qs[j];
        sumf += (fp16(x[ib].d) * fp16(y[ib].d)) * static_cast<float>(sumi) + fp16(x[ib].m) * fp16(y[ib].s);
    }
    return sumf;
}

float dot_q8_0(int64_t n, const BlockQ8_0* x, const BlockQ8_0* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < kQK8_0; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += static_cast<float>(sumi) * (fp16(x[ib].d) * fp16(y[ib].d));
    }
    return sumf;
}

float dot_q4_K(int64_t n, const BlockQ4_K* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        uint8_t sc[8], mn[8];
        q4k_unpack_scales(x[i].scales, sc, mn);
        int sumi = 0, summ = 0;
        for (int j = 0; j < kQK_K / 16; ++j) summ += y[i].bsums[j] * mn[j / 2];
        const uint8_t* q4 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        for (int j = 0; j < kQK_K / 64; ++j, q4 += 32, q8 += 64) {
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; ++l) {
                lo += (q4[l] & 0xF) * q8[l];
                hi += (q4[l] >> 4) * q8[l + 32];
            }
            sumi += sc[2 * j] * lo + sc[2 * j + 1] * hi;
        }
        sumf += fp16(x[i].d) * y[i].d * static_cast<float>(sumi) - fp16(x[i].dmin) * y[i].d * static_cast<float>(summ);
    }
    return sumf;
}

// ggml's vec_dot_q2_K_q8_K: 4-bit scales times 16-element integer sums, the mins through bsums.
float dot_q2_K(int64_t n, const BlockQ2_K* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int8_t q[kQK_K];
        q2k_values(x[i].qs, q);
        int sumi = 0, summ = 0;
        for (int g = 0; g < kQK_K / 16; ++g) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y[i].qs[16 * g + l];
            sumi += (x[i].scales[g] & 0xF) * s;
            summ += (x[i].scales[g] >> 4) * y[i].bsums[g];
        }
        sumf += y[i].d * fp16(x[i].d) * static_cast<float>(sumi) - y[i].d * fp16(x[i].dmin) * static_cast<float>(summ);
    }
    return sumf;
}

// ggml's vec_dot_q3_K_q8_K: signed 6-bit scales times 16-element integer sums.
float dot_q3_K(int64_t n, const BlockQ3_K* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int8_t sc[16], q[kQK_K];
        q3k_unpack_scales(x[i].scales, sc);
        q3k_values(x[i].qs, x[i].hmask, q);
        int sumi = 0;
        for (int g = 0; g < kQK_K / 16; ++g) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y[i].qs[16 * g + l];
            sumi += sc[g] * s;
        }
        sumf += fp16(x[i].d) * y[i].d * static_cast<float>(sumi);
    }
    return sumf;
}

// ggml's vec_dot_q5_K_q8_K: as Q4_K with 5-bit q.
float dot_q5_K(int64_t n, const BlockQ5_K* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        uint8_t sc[8], mn[8], q[kQK_K];
        q4k_unpack_scales(x[i].scales, sc, mn);
        q5k_values(x[i].qs, x[i].qh, q);
        int sumi = 0, summ = 0;
        for (int j = 0; j < kQK_K / 16; ++j) summ += y[i].bsums[j] * mn[j / 2];
        for (int j = 0; j < kQK_K / 32; ++j) {
            int s = 0;
            for (int l = 0; l < 32; ++l) s += q[32 * j + l] * y[i].qs[32 * j + l];
            sumi += sc[j] * s;
        }
        sumf += fp16(x[i].d) * y[i].d * static_cast<float>(sumi) - fp16(x[i].dmin) * y[i].d * static_cast<float>(summ);
    }
    return sumf;
}

// ggml's vec_dot_iq4_nl_q8_0: the levels times q8, per block of 32.
float dot_iq4_nl(int64_t n, const BlockIQ4_NL* x, const BlockQ8_0* y) {
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j)
            sumi += kIq4nlValues[x[ib].qs[j] & 0xF] * y[ib].qs[j] + kIq4nlValues[x[ib].qs[j] >> 4] * y[ib].qs[j + 16];
        sumf += fp16(x[ib].d) * fp16(y[ib].d) * static_cast<float>(sumi);
    }
    return sumf;
}

// ggml's vec_dot_iq4_xs_q8_K: per sub-block of 32, (ls - 32) times the levels' sum with q8.
float dot_iq4_xs(int64_t n, const BlockIQ4_XS* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int sumi = 0;
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const uint8_t* q = x[i].qs + 16 * ib;
            const int8_t* q8 = y[i].qs + 32 * ib;
            int s = 0;
            for (int j = 0; j < 16; ++j) s += kIq4nlValues[q[j] & 0xF] * q8[j] + kIq4nlValues[q[j] >> 4] * q8[j + 16];
            sumi += iq4xs_scale(x[i].scales_l, x[i].scales_h, ib) * s;
        }
        sumf += fp16(x[i].d) * y[i].d * static_cast<float>(sumi);
    }
    return sumf;
}

float dot_q6_K(int64_t n, const BlockQ6_K* x, const BlockQ8_K* y) {
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int8_t q[kQK_K];
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        for (int k = 0; k < kQK_K; k += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                q[k + l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                q[k + l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                q[k + l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                q[k + l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int sumi = 0;
        for (int g = 0; g < kQK_K / 16; ++g) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y[i].qs[16 * g + l];
            sumi += x[i].scales[g] * s;
        }
        sumf += fp16(x[i].d) * y[i].d * static_cast<float>(sumi);
    }
    return sumf;
}

template <float (*Conv)(uint16_t)>
float dot_half(int64_t n, const uint16_t* w, const float* x) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Conv(w[i])) * x[i];
    return static_cast<float>(sum);
}

float dot_f32(int64_t n, const float* w, const float* x) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x[i];
    return static_cast<float>(sum);
}

template <typename W, typename A, float (*Dot)(int64_t, const W*, const A*)>
void multi(int64_t n, const void* w, const void* act, size_t act_stride, int nt, float* out, size_t out_stride) {
    for (int t = 0; t < nt; ++t) {
        const auto* a = reinterpret_cast<const A*>(static_cast<const char*>(act) + static_cast<size_t>(t) * act_stride);
        out[static_cast<size_t>(t) * out_stride] = Dot(n, static_cast<const W*>(w), a);
    }
}

}  // namespace

TensorType vec_dot_type(TensorType wtype) {
    switch (wtype) {
        case TensorType::F32: case TensorType::F16: case TensorType::BF16: return TensorType::F32;
        case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: case TensorType::IQ4_NL: return TensorType::Q8_0;
        case TensorType::Q4_1: case TensorType::Q5_1: return TensorType::Q8_1;
        case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::Q4_K: case TensorType::Q5_K:
        case TensorType::Q6_K: case TensorType::IQ4_XS: return TensorType::Q8_K;
        default: break;
    }
    const char* name = tensor_type_info(wtype).name;
    throw std::invalid_argument(std::string("vec_dot: no dot kernel for weight type ") + (name ? name : "unknown"));
}

bool can_vec_dot(TensorType wtype) { return ref::vec_dot_fn(wtype) != nullptr; }

namespace ref {

VecDotFn vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::F32: return multi<float, float, dot_f32>;
        case TensorType::F16: return multi<uint16_t, float, dot_half<kernels::f16_to_f32>>;
        case TensorType::BF16: return multi<uint16_t, float, dot_half<kernels::bf16_to_f32>>;
        case TensorType::Q4_0: return multi<BlockQ4_0, BlockQ8_0, dot_q4_0>;
        case TensorType::Q4_1: return multi<BlockQ4_1, BlockQ8_1, dot_q4_1>;
        case TensorType::Q5_0: return multi<BlockQ5_0, BlockQ8_0, dot_q5_0>;
        case TensorType::Q5_1: return multi<BlockQ5_1, BlockQ8_1, dot_q5_1>;
        case TensorType::Q8_0: return multi<BlockQ8_0, BlockQ8_0, dot_q8_0>;
        case TensorType::Q2_K: return multi<BlockQ2_K, BlockQ8_K, dot_q2_K>;
        case TensorType::Q3_K: return multi<BlockQ3_K, BlockQ8_K, dot_q3_K>;
        case TensorType::Q4_K: return multi<BlockQ4_K, BlockQ8_K, dot_q4_K>;
        case TensorType::Q5_K: return multi<BlockQ5_K, BlockQ8_K, dot_q5_K>;
        case TensorType::IQ4_NL: return multi<BlockIQ4_NL, BlockQ8_0, dot_iq4_nl>;
        case TensorType::IQ4_XS: return multi<BlockIQ4_XS, BlockQ8_K, dot_iq4_xs>;
        case TensorType::Q6_K: return multi<BlockQ6_K, BlockQ8_K, dot_q6_K>;
        default: return nullptr;
    }
}

float vec_dot(TensorType wtype, int64_t n, const void* w_row, const void* act_row) {
    vec_dot_type(wtype);  // throws for unsupported types
    float out = 0.0f;
    vec_dot_fn(wtype)(n, w_row, act_row, 0, 1, &out, 0);
    return out;
}

}  // namespace ref

VecDotFn vec_dot_fn(TensorType wtype, Isa isa) {
    if (static_cast<int>(isa) > static_cast<int>(max_supported_isa())) return nullptr;
    VecDotFn fn = nullptr;
    switch (isa) {
        case Isa::Avx512:
            fn = avx512::vec_dot_fn(wtype);
            if (!fn) fn = avx2::vec_dot_fn(wtype);  // a type with no AVX-512 kernel yet
            break;
        case Isa::Avx2: fn = avx2::vec_dot_fn(wtype); break;
        case Isa::Scalar: break;
    }
    return fn ? fn : ref::vec_dot_fn(wtype);
}

float vec_dot(TensorType wtype, int64_t n, const void* w_row, const void* act_row) {
    vec_dot_type(wtype);  // throws for unsupported types
    float out = 0.0f;
    vec_dot_fn(wtype, active_isa())(n, w_row, act_row, 0, 1, &out, 0);
    return out;
}

DotTileFn dot_tile_fn(TensorType wtype, Isa isa) {
    if (isa != Isa::Avx512 || static_cast<int>(isa) > static_cast<int>(max_supported_isa())) return nullptr;
    return avx512::dot_tile_fn(wtype);
}

}  // namespace sl::kernels
