// AVX-512 tile kernels (dot.h DotTileFn): `rows` weight rows x NT activation rows per call (Q4_K
// Q5_K and Q6_K: dot_kquant_avx512.cpp, 8 tokens per pass), here for the
// block types whose activations carry f16 scales (Q8_0 with Q4_0 / Q5_0 / Q8_0 weights, Q8_1 with
// Q4_1 / Q5_1 weights). The row-at-a-time kernels of dot_avx512.cpp convert every activation
// block's f16 scale (and Q8_1's sum) again for each weight row; here they are converted once per
// tile into float scale vectors (one 16-lane vector per block pair and token: the first block's
// scale in lanes 0..7, the second's in 8..15) and reused by every row. The arithmetic per row is
// dot_avx512.cpp's, operation for operation (the same products d_x * d_y, the same FMA order), so
// the results are bit-identical to it (Q8_1's m_x s_y sums are fused multiply-adds, block after
// block, in both). Compiled with AVX-512 flags; called only when
// active_isa() == Isa::Avx512.
//
// Threading contract: pure; the scale scratch is thread_local.
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_avx512_helpers.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx512 {

namespace {

using namespace helpers;

// Per token: npairs scale vectors (d_y of blocks 2p, 2p+1); for Q8_1 the sums s_y by block, four
// lanes per block (tokens 0..NT-1, zeros after), so one 128-bit FMA serves every token.
struct Scales {
    std::vector<float> dv;    // (NT, npairs, 16)
    std::vector<float> s;     // (nb, 4)
    std::vector<float> tail;  // (NT): d_y of the last block when nb is odd
};

Scales& scratch() {
    thread_local Scales s;
    return s;
}

template <int NT, typename YB, bool kSums>
void prepare(const void* act, size_t stride, int64_t nb, Scales& sc) {
    const int64_t np = nb / 2;
    sc.dv.resize(static_cast<size_t>(NT * np * 16));
    sc.tail.resize(NT);
    if constexpr (kSums) sc.s.assign(static_cast<size_t>(4 * nb), 0.0f);
    for (int t = 0; t < NT; ++t) {
        const YB* y = row<YB>(act, stride, t);
        for (int64_t p = 0; p < np; ++p)
            _mm512_storeu_ps(sc.dv.data() + (t * np + p) * 16, scale2(h2f(y[2 * p].d), h2f(y[2 * p + 1].d)));
        if (nb % 2) sc.tail[static_cast<size_t>(t)] = h2f(y[nb - 1].d);
        if constexpr (kSums)
            for (int64_t b = 0; b < nb; ++b) sc.s[static_cast<size_t>(4 * b + t)] = h2f(y[b].s);
    }
}

// ---- Q8_0, Q4_0, Q5_0 weights x Q8_0 activations ---------------------------------------------
template <int NT, W0 K>
void tile_q8_0(int64_t n, const void* wv, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    using WB = W0Block<K>;
    const int64_t nb = n / 32, np = nb / 2;
    Scales& sc = scratch();
    prepare<NT, BlockQ8_0, false>(act, stride, nb, sc);
    const BlockQ8_0* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_0>(act, stride, t);
    for (int r = 0; r < rows; ++r) {
        const WB* x = reinterpret_cast<const WB*>(static_cast<const char*>(wv) + static_cast<size_t>(r) * wbytes);
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t p = 0; p < np; ++p) {
            const int64_t ib = 2 * p;
            __m512i w;
            if constexpr (K == W0::Q4_0) {
                w = _mm512_sub_epi8(nibbles2(x[ib].qs, x[ib + 1].qs), _mm512_set1_epi8(8));
            } else if constexpr (K == W0::Q5_0) {
                const __m512i nib = nibbles2(x[ib].qs, x[ib + 1].qs);
                w = _mm512_mask_sub_epi8(nib, ~q5_bits2(x[ib].qh, x[ib + 1].qh), nib, _mm512_set1_epi8(16));
            } else {
                w = load2x32(x[ib].qs, x[ib + 1].qs);
            }
            const __m512i aw = _mm512_abs_epi8(w);
            const __mmask64 neg = _mm512_movepi8_mask(w);
            const __m512 dxv = scale2(h2f(x[ib].d), h2f(x[ib + 1].d));
            for (int t = 0; t < NT; ++t) {
                const __m512i q = dot_ss(aw, neg, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
                const __m512 s = _mm512_mul_ps(dxv, _mm512_loadu_ps(sc.dv.data() + (t * np + p) * 16));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), s, acc[t]);
            }
        }
        if (nb % 2) {
            const int64_t ib = nb - 1;
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
                const __m256i q = dot_ss(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
                const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(dx * sc.tail[static_cast<size_t>(t)]));
                acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
            }
        }
        for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os + static_cast<size_t>(r)] = _mm512_reduce_add_ps(acc[t]);
    }
}

// ---- Q4_1 and Q5_1 weights x Q8_1 activations: d_x d_y sum(q y) + m_x s_y ---------------------
template <int NT, bool kQ5>
void tile_q8_1(int64_t n, const void* wv, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    using WB = std::conditional_t<kQ5, BlockQ5_1, BlockQ4_1>;
    const int64_t nb = n / 32, np = nb / 2;
    Scales& sc = scratch();
    prepare<NT, BlockQ8_1, true>(act, stride, nb, sc);
    const BlockQ8_1* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_1>(act, stride, t);
    // d and m of two blocks in one conversion: [d0, m0, d1, m1] -> d0 in lanes 0..7, d1 in 8..15.
    const __m512i dsel = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int r = 0; r < rows; ++r) {
        const WB* x = reinterpret_cast<const WB*>(static_cast<const char*>(wv) + static_cast<size_t>(r) * wbytes);
        __m512 acc[NT];
        __m128 summs = _mm_setzero_ps();  // lane t: token t's sum of m_x s_y
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t p = 0; p < np; ++p) {
            const int64_t ib = 2 * p;
            __m512i w = nibbles2(x[ib].qs, x[ib + 1].qs);
            if constexpr (kQ5) w = _mm512_mask_add_epi8(w, q5_bits2(x[ib].qh, x[ib + 1].qh), w, _mm512_set1_epi8(16));
            uint32_t dm0, dm1;
            std::memcpy(&dm0, reinterpret_cast<const char*>(x + ib), 4);  // d, m: the block's first two f16
            std::memcpy(&dm1, reinterpret_cast<const char*>(x + ib + 1), 4);
            const __m128 f = _mm_cvtph_ps(_mm_set_epi32(0, 0, static_cast<int>(dm1), static_cast<int>(dm0)));
            const __m512 dxv = _mm512_permutexvar_ps(dsel, _mm512_castps128_ps512(f));
            for (int t = 0; t < NT; ++t) {
                const __m512i q = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
                const __m512 s = _mm512_mul_ps(dxv, _mm512_loadu_ps(sc.dv.data() + (t * np + p) * 16));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), s, acc[t]);
            }
            summs = _mm_fmadd_ps(_mm_permute_ps(f, 0x55), _mm_loadu_ps(sc.s.data() + 4 * ib), summs);
            summs = _mm_fmadd_ps(_mm_permute_ps(f, 0xFF), _mm_loadu_ps(sc.s.data() + 4 * (ib + 1)), summs);
        }
        if (nb % 2) {
            const int64_t ib = nb - 1;
            __m256i w = nibbles1(x[ib].qs);
            if constexpr (kQ5) {
                w = _mm256_mask_add_epi8(w, static_cast<__mmask32>(q5_bits(x[ib].qh)), w, _mm256_set1_epi8(16));
            }
            const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
            for (int t = 0; t < NT; ++t) {
                const __m256i q = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w,
                                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
                const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(dx * sc.tail[static_cast<size_t>(t)]));
                acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
            }
            summs = _mm_fmadd_ps(_mm_set1_ps(mx), _mm_loadu_ps(sc.s.data() + 4 * ib), summs);
        }
        alignas(16) float sm[4];
        _mm_store_ps(sm, summs);
        for (int t = 0; t < NT; ++t)
            out[static_cast<size_t>(t) * os + static_cast<size_t>(r)] = _mm512_reduce_add_ps(acc[t]) + sm[t];
    }
}

// Up to 4 tokens per pass (the Q8_0 / Q8_1 kernels); more are split into passes of 4.
template <template <int> class K>
void by_nt(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, int nt, float* out,
           size_t os) {
    for (; nt > 4; nt -= 4) {
        K<4>::run(n, w, wbytes, rows, act, stride, out, os);
        act = static_cast<const char*>(act) + 4 * stride;
        out += 4 * os;
    }
    switch (nt) {
        case 1: return K<1>::run(n, w, wbytes, rows, act, stride, out, os);
        case 2: return K<2>::run(n, w, wbytes, rows, act, stride, out, os);
        case 3: return K<3>::run(n, w, wbytes, rows, act, stride, out, os);
        default: return K<4>::run(n, w, wbytes, rows, act, stride, out, os);
    }
}


template <int NT> struct TQ4_0 { static constexpr auto run = tile_q8_0<NT, W0::Q4_0>; };
template <int NT> struct TQ5_0 { static constexpr auto run = tile_q8_0<NT, W0::Q5_0>; };
template <int NT> struct TQ8_0 { static constexpr auto run = tile_q8_0<NT, W0::Q8_0>; };
template <int NT> struct TQ4_1 { static constexpr auto run = tile_q8_1<NT, false>; };
template <int NT> struct TQ5_1 { static constexpr auto run = tile_q8_1<NT, true>; };

}  // namespace

DotTileFn dot_tile_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_0: return by_nt<TQ4_0>;
        case TensorType::Q5_0: return by_nt<TQ5_0>;
        case TensorType::Q8_0: return by_nt<TQ8_0>;
        case TensorType::Q4_1: return by_nt<TQ4_1>;
        case TensorType::Q5_1: return by_nt<TQ5_1>;
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K: return kquant_tile_fn(wtype);  // dot_kquant_avx512.cpp: 8 tokens per pass
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx512
