// AVX-512 (F, BW, VL, DQ, VNNI) dot kernels (dot.h). Compiled with AVX-512 flags; called only
// when active_isa() == Isa::Avx512.
//
// Shape of every kernel: for each weight block, decode it once into registers (nibbles -> bytes),
// then for each of the NT activation rows do the integer dot with VNNI (vpdpbusd: u8 x s8 -> s32)
// and fold the block scale in with one FMA into a per-row float accumulator. Signed x signed
// products use |w| x sign(y, w). Horizontal sums happen once per row, at the end. The K-quants
// (Q4_K, Q5_K, Q6_K: per-sub-block scales, tokens in pairs) are in dot_kquant_avx512.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_avx512_helpers.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx512 {

namespace {

using namespace helpers;

template <int NT>
inline void finish(const __m512 (&acc)[NT], float* out, size_t out_stride) {
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// ---- Q8_0, Q4_0 and Q5_0 weights, Q8_0 activations --------------------------------------------
template <int NT, W0 K>
void dot_x_q8_0(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = W0Block<K>;
    const WB* x = static_cast<const WB*>(wv);
    const int64_t nb = n / 32;
    const BlockQ8_0* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_0>(act, stride, t);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        prefetch_ahead<2 * sizeof(WB), NT>(x + ib);
        __m512i w;
        if constexpr (K == W0::Q4_0) {
            w = _mm512_sub_epi8(nibbles2(x[ib].qs, x[ib + 1].qs), _mm512_set1_epi8(8));
        } else if constexpr (K == W0::Q5_0) {
            // q - 16 = nibble where the high bit is set, nibble - 16 where it is clear.
            const __m512i nib = nibbles2(x[ib].qs, x[ib + 1].qs);
            w = _mm512_mask_sub_epi8(nib, ~q5_bits2(x[ib].qh, x[ib + 1].qh), nib, _mm512_set1_epi8(16));
        } else {
            w = load2x32(x[ib].qs, x[ib + 1].qs);
        }
        const __m512i aw = _mm512_abs_epi8(w);
        const __mmask64 neg = _mm512_movepi8_mask(w);
        const float dx0 = h2f(x[ib].d), dx1 = h2f(x[ib + 1].d);
        for (int t = 0; t < NT; ++t) {
            const __m512i p = dot_ss(aw, neg, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale2(dx0 * h2f(y[t][ib].d), dx1 * h2f(y[t][ib + 1].d)),
                                     acc[t]);
        }
    }
    if (ib < nb) {
        __m256i w;
        if constexpr (K == W0::Q4_0) {
            w = _mm256_sub_epi8(nibbles1(x[ib].qs), _mm256_set1_epi8(8));
        } else if constexpr (K == W0::Q5_0) {
            const __m256i nib = nibbles1(x[ib].qs);
            w = _mm256_mask_sub_epi8(nib, static_cast<__mmask32>(~q5_bits(x[ib].qh)), nib, _mm256_set1_epi8(16));
        } else {
            w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[ib].qs));
        }
        const float dx = h2f(x[ib].d);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_ss(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
            const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)));
            acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
        }
    }
    finish<NT>(acc, out, os);
}

// ---- Q4_1 and Q5_1 weights, Q8_1 activations: d_x d_y sum(q y) + m_x s_y ---------------------
template <int NT, bool kQ5>
void dot_x_q8_1(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = std::conditional_t<kQ5, BlockQ5_1, BlockQ4_1>;
    const auto* x = static_cast<const WB*>(wv);
    const int64_t nb = n / 32;
    const BlockQ8_1* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_1>(act, stride, t);
    __m512 acc[NT];
    float summs[NT] = {};
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        prefetch_ahead<2 * sizeof(WB), NT>(x + ib);
        __m512i w = nibbles2(x[ib].qs, x[ib + 1].qs);
        if constexpr (kQ5) w = _mm512_mask_add_epi8(w, q5_bits2(x[ib].qh, x[ib + 1].qh), w, _mm512_set1_epi8(16));
        const float dx0 = h2f(x[ib].d), dx1 = h2f(x[ib + 1].d);
        const float mx0 = h2f(x[ib].m), mx1 = h2f(x[ib + 1].m);
        for (int t = 0; t < NT; ++t) {
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale2(dx0 * h2f(y[t][ib].d), dx1 * h2f(y[t][ib + 1].d)),
                                     acc[t]);
            // Fused, block after block (as the tile kernel's lanes: dot_tile_avx512.cpp).
            summs[t] = std::fma(mx0, h2f(y[t][ib].s), summs[t]);
            summs[t] = std::fma(mx1, h2f(y[t][ib + 1].s), summs[t]);
        }
    }
    if (ib < nb) {
        __m256i w = nibbles1(x[ib].qs);
        if constexpr (kQ5) {
            w = _mm256_mask_add_epi8(w, static_cast<__mmask32>(q5_bits(x[ib].qh)), w, _mm256_set1_epi8(16));
        }
        const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w,
                                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
            const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)));
            acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
            summs[t] = std::fma(mx, h2f(y[t][ib].s), summs[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os] = _mm512_reduce_add_ps(acc[t]) + summs[t];
}

// ---- F32 / F16 / BF16 weights, F32 activations ---------------------------------------------------
enum class FloatKind { F32, F16, BF16 };

template <FloatKind K>
inline __m512 load_w(const void* w, int64_t i, __mmask16 m) {
    if constexpr (K == FloatKind::F32) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
    } else if constexpr (K == FloatKind::F16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i));
    } else {
        const __m256i b = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
    }
}

template <int NT, FloatKind K>
void dot_float(int64_t n, const void* w, const void* act, size_t stride, float* out, size_t os) {
    const float* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<float>(act, stride, t);
    constexpr int kU = NT == 1 ? 4 : 2;  // independent FMA chains per row
    __m512 acc[kU][NT];
    for (int u = 0; u < kU; ++u)
        for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 * kU <= n; i += 16 * kU) {
        for (int u = 0; u < kU; ++u) {
            const __m512 wv = load_w<K>(w, i + 16 * u, 0xFFFF);
            for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(y[t] + i + 16 * u), acc[u][t]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 wv = load_w<K>(w, i, m);
        for (int t = 0; t < NT; ++t) acc[0][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, y[t] + i), acc[0][t]);
    }
    for (int t = 0; t < NT; ++t) {
        __m512 s = acc[0][t];
        for (int u = 1; u < kU; ++u) s = _mm512_add_ps(s, acc[u][t]);
        out[static_cast<size_t>(t) * os] = _mm512_reduce_add_ps(s);
    }
}

// Dispatches nt (1..4) to the unrolled template.
template <template <int> class K>
void by_nt(int64_t n, const void* w, const void* act, size_t stride, int nt, float* out, size_t os) {
    switch (nt) {
        case 1: return K<1>::run(n, w, act, stride, out, os);
        case 2: return K<2>::run(n, w, act, stride, out, os);
        case 3: return K<3>::run(n, w, act, stride, out, os);
        default: return K<4>::run(n, w, act, stride, out, os);
    }
}

template <int NT> struct KQ4_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q4_0>; };
template <int NT> struct KQ5_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q5_0>; };
template <int NT> struct KQ8_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q8_0>; };
template <int NT> struct KQ4_1 { static constexpr auto run = dot_x_q8_1<NT, false>; };
template <int NT> struct KQ5_1 { static constexpr auto run = dot_x_q8_1<NT, true>; };
template <int NT> struct KF32 { static constexpr auto run = dot_float<NT, FloatKind::F32>; };
template <int NT> struct KF16 { static constexpr auto run = dot_float<NT, FloatKind::F16>; };
template <int NT> struct KBF16 { static constexpr auto run = dot_float<NT, FloatKind::BF16>; };

}  // namespace

VecDotFn vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_0: return by_nt<KQ4_0>;
        case TensorType::Q8_0: return by_nt<KQ8_0>;
        case TensorType::Q4_1: return by_nt<KQ4_1>;
        case TensorType::Q5_0: return by_nt<KQ5_0>;
        case TensorType::Q5_1: return by_nt<KQ5_1>;
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K: return kquant_vec_dot_fn(wtype);  // dot_kquant_avx512.cpp
        case TensorType::F32: return by_nt<KF32>;
        case TensorType::F16: return by_nt<KF16>;
        case TensorType::BF16: return by_nt<KBF16>;
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx512
