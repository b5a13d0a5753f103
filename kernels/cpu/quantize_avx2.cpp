// AVX2 activation quantizers (quantize.h). Compiled with AVX2/FMA/F16C; called only when
// active_isa() >= Isa::Avx2. Every function writes the same bytes as its ref:: counterpart: the
// float operations are the same IEEE operations in the same order, and rounding emulates roundf
// (Q8_0/Q8_1) or uses the default round-half-even (Q8_K) exactly as the reference does.
#include <immintrin.h>

#include "kernels/cpu/quant_common.h"
#include "kernels/cpu/quantize.h"

namespace sl::kernels::avx2 {

namespace {

inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf (half away from zero) of values with |t| < 2^23, then to int32.
inline __m256i roundf_epi32(__m256 t) {
    const __m256 tr = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = abs_ps(_mm256_sub_ps(t, tr));  // exact
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), _mm256_set1_ps(1.0f));
    const __m256 adj = _mm256_or_ps(up, _mm256_and_ps(t, _mm256_set1_ps(-0.0f)));
    return _mm256_cvttps_epi32(_mm256_add_ps(tr, adj));
}

// Four vectors of 8 int32 in [-128, 127] -> 32 int8 in order.
inline __m256i pack_i32x32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One block of 32 for Q8_0/Q8_1: returns d, writes qs, and the sum of the q when `sum` is set.
inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, abs_ps(v[k]));
    }
    const float d = hmax(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = roundf_epi32(_mm256_mul_ps(v[k], mul));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32x32(q[0], q[1], q[2], q[3]));
    if (sum) *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    return d;
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
    const int64_t nb = n / kQK8_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        y[i].d = to_fp16(quantize_block32(x, y[i].qs, nullptr));
    }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
    const int64_t nb = n / kQK8_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
        int sum = 0;
        const float d = quantize_block32(x, y[i].qs, &sum);
        y[i].d = to_fp16(d);
        y[i].s = to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        __m256 amaxv = _mm256_setzero_ps();
        for (int k = 0; k < kQK_K; k += 8) amaxv = _mm256_max_ps(amaxv, abs_ps(_mm256_loadu_ps(x + k)));
        const float amax = hmax(amaxv);
        if (amax == 0.0f) {
            y[i].d = 0.0f;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            std::memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        // The reference keeps the first value of largest magnitude (its sign matters).
        float max = 0.0f;
        for (int k = 0; k < kQK_K; k += 8) {
            const int m = _mm256_movemask_ps(
                _mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + k)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (m) {
                max = x[k + __builtin_ctz(static_cast<unsigned>(m))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 mul = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int g = 0; g < kQK_K; g += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k) {
                q[k] = _mm256_min_epi32(lim, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8 * k), mul)));
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + g), pack_i32x32(q[0], q[1], q[2], q[3]));
            y[i].bsums[g / 16] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
            y[i].bsums[g / 16 + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
        }
        y[i].d = 1.0f / iscale;
    }
}

}  // namespace sl::kernels::avx2
