// AVX-512 (F, BW, VL, DQ, VNNI) dot kernels (dot.h). Compiled with AVX-512 flags; called only
// when active_isa() == Isa::Avx512.
//
// Shape of every kernel: for each weight block, decode it once into registers (nibbles -> bytes,
// 6-bit scales -> int16 lanes), then for each of the NT activation rows do the integer dot with
// VNNI (vpdpbusd: u8 x s8 -> s32, or vpmaddubsw + vpdpwssd when per-sub-block scales apply) and
// fold the block scale in with one FMA into a per-row float accumulator. Signed x signed products
// use |w| x sign(y, w). Horizontal sums happen once per row, at the end.
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

// ---- Q4_K weights, Q8_K activations ------------------------------------------------------------
// sum = d d_y sum_j sc_j (q_j . y_j) - dmin sum_j m_j (d_y bsum8_j), j the 8 sub-blocks of 32.
//
// Tokens go in pairs (t, u). Per token and block, 4 vpdpbusd (u8 x s8, products summed in fours)
// leave the block's dot in two vectors whose int32 lanes each belong to one sub-block for the
// whole block: A holds sub-blocks 0..3 (128-bit lane L: sub-block L, 4 lanes of 8 products each),
// B sub-blocks 4..7. That takes both operands reordered: the weights' nibbles per row and block,
// 16-value pieces moved between 128-bit lanes (4 vpermt2q, shared by all the tile's tokens), the
// activations once per tile (Q4KAct). |lane| <= 8 * 15 * 128 fits int16, so vpackssdw packs the
// pair's A_t, A_u (and B_t, B_u) exactly into one vector, and one vpdpwssd per pack applies the
// 6-bit scales: per token pair and block 8 vpdpbusd, 2 vpackssdw, 2 vpdpwssd, 1 conversion and
// 2 FMAs where one token at a time took 4 + 2 + 2 + 1 + 1 per token: the multiply port (vpdpbusd,
// vpdpwssd and the conversion share it) 11 uops per pair instead of 14.
// The pair's int32 sums come out as [t, t, u, u] in every 128-bit lane; the float accumulator
// keeps that layout, the block scale (d d_y) as a vector of it (Q4KAct::dy), and the mins' terms
// (dmin m_j) (d_y bsum8_j) in it too (Q4KAct::am, lane 4L + 2s + e: token s, sub-block 2L + e),
// subtracted per block. One transpose-and-add per row sums the 8 tokens' lanes (q4k_finish).
// Bench (one core, 128-row tiles x 2048, 8 tokens; this host): 73.5 -> 103 GMAC/s against that
// one-token-at-a-time kernel (8192-wide rows: 64 -> 95), the same error against an exact reference.

// Per tile: the activations reordered for the kernel and the per-pair vectors.
//   qs: (nb, NT) x 256 bytes: pieces {0,2,4,6}, {1,3,5,7}, {8,..,14}, {9,..,15} of 16 values;
//   dy, am: (nb, pairs) vectors of 16 floats in the [t, t, u, u] layout (zeros for a missing u).
// Block-major, so a block's operands sit at fixed offsets from one pointer.
struct Q4KAct {
    std::vector<int8_t> qs;  // 256 bytes per token and block
    std::vector<float> dy, am;
};

Q4KAct& q4k_act_scratch() {
    thread_local Q4KAct s;
    return s;
}

// The activation side of the mins for one token and block: d_y * bsum8_j, j = 0..7.
inline __m256 q4k_act_mins(const BlockQ8_K& yb) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.bsums));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(b, _mm256_set1_epi16(1))), _mm256_set1_ps(yb.d));
}

template <int NT>
void q4k_prepare(const void* act, size_t stride, int64_t nb, Q4KAct& a) {
    constexpr int NP = (NT + 1) / 2;
    a.qs.resize(static_cast<size_t>(NT * nb * 256));
    a.dy.resize(static_cast<size_t>(NP * nb * 16));
    a.am.resize(static_cast<size_t>(NP * nb * 16));
    for (int t = 0; t < NT; ++t) {
        const BlockQ8_K* y = row<BlockQ8_K>(act, stride, t);
        for (int64_t i = 0; i < nb; ++i) {
            int8_t* o = a.qs.data() + (i * NT + t) * 256;
            for (int h = 0; h < 2; ++h) {
                const __m512i y0 = _mm512_loadu_si512(y[i].qs + 128 * h);
                const __m512i y1 = _mm512_loadu_si512(y[i].qs + 128 * h + 64);
                _mm512_storeu_si512(o + 128 * h, _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_storeu_si512(o + 128 * h + 64, _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
    }
    const __m512i mins_idx = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    for (int p = 0; p < NP; ++p) {
        const BlockQ8_K* y0 = row<BlockQ8_K>(act, stride, 2 * p);
        const BlockQ8_K* y1 = 2 * p + 1 < NT ? row<BlockQ8_K>(act, stride, 2 * p + 1) : nullptr;
        for (int64_t i = 0; i < nb; ++i) {
            _mm512_storeu_ps(a.dy.data() + (i * NP + p) * 16,
                             _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(y0[i].d),
                                                  _mm512_set1_ps(y1 ? y1[i].d : 0.0f)));
            const __m512 m0 = _mm512_castps256_ps512(q4k_act_mins(y0[i]));
            const __m512 m1 = y1 ? _mm512_castps256_ps512(q4k_act_mins(y1[i])) : _mm512_setzero_ps();
            _mm512_storeu_ps(a.am.data() + (i * NP + p) * 16, _mm512_permutex2var_ps(m0, mins_idx, m1));
        }
    }
}

// The 8 (or fewer) tokens' sums from the pairs' accumulators (lanes [t, t, u, u] per 128 bits):
// out[t * os], t < NT.
template <int NT>
inline void q4k_finish(const __m512 (&acc)[(NT + 1) / 2], float* out, size_t os) {
    constexpr int NP = (NT + 1) / 2;
    auto at = [&](int p) { return p < NP ? acc[p] : _mm512_setzero_ps(); };
    // 128-bit lanes: s01 = [p0: L0+L2, L1+L3; p1: L0+L2, L1+L3], then [p0, p1, p2, p3] whole.
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(at(0), at(1), _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_f32x4(at(0), at(1), _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(at(2), at(3), _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_f32x4(at(2), at(3), _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
    // Per 128-bit lane [t, t, u, u]: lanes 0 and 2 get t and u.
    const __m512 h = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
    alignas(64) float r[16];
    _mm512_store_ps(r, h);
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os] = r[2 * t];
}

// One weight row x NT tokens over blocks [i0, i1) (i1 < 0: to the end), with q4k_prepare's
// activations. Unless i1 is the end, the accumulators continue from and stay in `state` (pairs
// vectors of 16 floats): the row's sums in pieces, each lane's FMAs in the order of one pass.
template <int NT>
void dot_q4_K_rows(int64_t n, const void* wv, const Q4KAct& a, float* out, size_t os, int64_t i0 = 0,
                   int64_t i1 = -1, float* state = nullptr) {
    static_assert(NT <= 8);
    const auto* x = static_cast<const BlockQ4_K*>(wv);
    const int64_t nb = n / kQK_K;
    constexpr int NP = (NT + 1) / 2;
    __m512 acc[NP];
    for (int p = 0; p < NP; ++p) acc[p] = i0 > 0 ? _mm512_loadu_ps(state + 16 * p) : _mm512_setzero_ps();
    if (i1 < 0) i1 = nb;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    // Weight pieces: P1 = [sb0 0..15, sb1 0..15, sb2 0..15, sb3 0..15] from the low (L) and high
    // (H) nibbles of qs[0..63], P2 the values 16..31; P3, P4 from qs[64..127] (sub-blocks 4..7).
    const __m512i pidx0 = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i pidx1 = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    // Scales: pack lane j (128-bit lane j / 8) belongs to sub-block j / 8 (A) or 4 + j / 8 (B).
    const __m512i sidx0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0,
                                           0, 0, 0, 0, 0, 0, 0);
    const __m512i sidx1 = _mm512_add_epi16(sidx0, _mm512_set1_epi16(4));
    // Mins: lane 4L + 2s + e holds sub-block 2L + e.
    const __m512i midx = _mm512_setr_epi32(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7);
    for (int64_t i = i0; i < i1; ++i) {
        prefetch_ahead<sizeof(BlockQ4_K), NT>(x + i);
        uint64_t sc, mn;
        q4k_scale_min_words(x[i].scales, &sc, &mn);
        const __m512i sc512 =
            _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
        const __m512i sv0 = _mm512_permutexvar_epi16(sidx0, sc512), sv1 = _mm512_permutexvar_epi16(sidx1, sc512);
        __m512i q[4];
        for (int h = 0; h < 2; ++h) {
            const __m512i b = _mm512_loadu_si512(x[i].qs + 64 * h);
            const __m512i lo = _mm512_and_si512(b, m4), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
            q[2 * h] = _mm512_permutex2var_epi64(lo, pidx0, hi);
            q[2 * h + 1] = _mm512_permutex2var_epi64(lo, pidx1, hi);
        }
        const __m512 dx = _mm512_set1_ps(h2f(x[i].d));
        const __m512 wm = _mm512_permutexvar_ps(
            midx, _mm512_castps256_ps512(_mm256_mul_ps(
                      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mn)))),
                      _mm256_set1_ps(h2f(x[i].dmin)))));
        const int8_t* yb = a.qs.data() + static_cast<size_t>(i * NT) * 256;
        const float* dyb = a.dy.data() + static_cast<size_t>(i * NP) * 16;
        const float* amb = a.am.data() + static_cast<size_t>(i * NP) * 16;
        for (int p = 0; p < NP; ++p) {
            const int8_t* yt = yb + 2 * p * 256;
            auto dot4 = [&](const int8_t* y, int k) {
                const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], _mm512_loadu_si512(y + 64 * k));
                return _mm512_dpbusd_epi32(d, q[k + 1], _mm512_loadu_si512(y + 64 * k + 64));
            };
            const __m512i at = dot4(yt, 0), bt = dot4(yt, 2);
            __m512i au = _mm512_setzero_si512(), bu = _mm512_setzero_si512();
            if (2 * p + 1 < NT) {
                au = dot4(yt + 256, 0);
                bu = dot4(yt + 256, 2);
            }
            const __m512i sa = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(at, au), sv0);
            const __m512i sumi = _mm512_dpwssd_epi32(sa, _mm512_packs_epi32(bt, bu), sv1);
            const __m512 scale = _mm512_mul_ps(dx, _mm512_loadu_ps(dyb + 16 * p));
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), scale, acc[p]);
            acc[p] = _mm512_fnmadd_ps(wm, _mm512_loadu_ps(amb + 16 * p), acc[p]);
        }
    }
    if (i1 < nb) {
        for (int p = 0; p < NP; ++p) _mm512_storeu_ps(state + 16 * p, acc[p]);
        return;
    }
    q4k_finish<NT>(acc, out, os);
}

// VecDotFn: one row, the activations prepared per call.
template <int NT>
void dot_q4_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    Q4KAct& a = q4k_act_scratch();
    q4k_prepare<NT>(act, stride, n / kQK_K, a);
    dot_q4_K_rows<NT>(n, wv, a, out, os);
}

// DotTileFn body: the activations once, then every row. Rows longer than kQ4KChunk
// blocks go in pieces of that many blocks, every row's piece before the next piece: NT tokens'
// activations for a piece (8 tokens x 8 blocks: 18 KB) stay in L1 while the rows pass over them,
// where a whole ffn_down row's (8192 wide: 75 KB) came from L2 for each row (one core, 8192 x
// 256 rows, 64 tokens: 57 -> 70 GMAC/s; 2048-wide rows: 72).
// Activations up to kQ4KWholeRowBytes stay in L1 anyway: rows go whole (one token, decode: in
// pieces the rows' weights no longer stream in order, -8 % decode on the 1B model).
constexpr int64_t kQ4KChunk = 8;
constexpr int64_t kQ4KWholeRowBytes = 24 * 1024;

template <int NT>
void tile_q4_K(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    const int64_t nb = n / kQK_K;
    Q4KAct& a = q4k_act_scratch();
    q4k_prepare<NT>(act, stride, nb, a);
    auto row_w = [&](int r) { return static_cast<const char*>(w) + static_cast<size_t>(r) * wbytes; };
    if (nb <= kQ4KChunk || NT * nb * static_cast<int64_t>(sizeof(BlockQ8_K)) <= kQ4KWholeRowBytes) {
        for (int r = 0; r < rows; ++r) dot_q4_K_rows<NT>(n, row_w(r), a, out + r, os);
        return;
    }
    constexpr int kState = 16 * ((NT + 1) / 2);
    thread_local std::vector<float> state;
    state.resize(static_cast<size_t>(rows * kState));
    for (int64_t i0 = 0; i0 < nb; i0 += kQ4KChunk) {
        const int64_t i1 = std::min(nb, i0 + kQ4KChunk);
        for (int r = 0; r < rows; ++r)
            dot_q4_K_rows<NT>(n, row_w(r), a, out + r, os, i0, i1, state.data() + static_cast<size_t>(r) * kState);
    }
}

// ---- Q6_K weights, Q8_K activations: sum sc_g (sum q y - 32 bsum_g) ---------------------------
template <int NT>
void dot_q6_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    const auto* x = static_cast<const BlockQ6_K*>(wv);
    const int64_t nb = n / kQK_K;
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    // Lane j of permutation k picks scale 4k + j / 8 (16 values = 8 int16 pair lanes per scale).
    __m512i idx[4];
    for (int k = 0; k < 4; ++k) {
        alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; ++j) ix[j] = static_cast<int16_t>(4 * k + j / 8);
        idx[k] = _mm512_load_si512(ix);
    }
    for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead<sizeof(BlockQ6_K), NT>(x + i);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
        const __m512i sc512 = _mm512_zextsi256_si512(sc16);
        __m512i q[4], sv[4];
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * h);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
            const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh2, m30));
        }
        for (int k = 0; k < 4; ++k) sv[k] = _mm512_permutexvar_epi16(idx[k], sc512);
        const float dx = h2f(x[i].d);
        for (int t = 0; t < NT; ++t) {
            const BlockQ8_K& yb = y[t][i];
            __m512i sumi = _mm512_setzero_si512();
            for (int k = 0; k < 4; ++k) {
                const __m512i p16 = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(yb.qs + 64 * k));
                sumi = _mm512_dpwssd_epi32(sumi, p16, sv[k]);
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.bsums)), sc16);
            sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(dx * yb.d), acc[t]);
        }
    }
    finish<NT>(acc, out, os);
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
template <int NT> struct KQ4_K {
    static constexpr auto run = dot_q4_K<NT>;
    static constexpr auto tile = tile_q4_K<NT>;
};
template <int NT> struct KQ6_K { static constexpr auto run = dot_q6_K<NT>; };
template <int NT> struct KF32 { static constexpr auto run = dot_float<NT, FloatKind::F32>; };
template <int NT> struct KF16 { static constexpr auto run = dot_float<NT, FloatKind::F16>; };
template <int NT> struct KBF16 { static constexpr auto run = dot_float<NT, FloatKind::BF16>; };

}  // namespace

namespace {

// `rows` weight rows x NT tokens with a row kernel K<NT>.
template <template <int> class K, int NT>
void rows_of(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out, size_t os) {
    for (int r = 0; r < rows; ++r)
        K<NT>::run(n, static_cast<const char*>(w) + static_cast<size_t>(r) * wbytes, act, stride, out + r, os);
}

// A DotTileFn over up to kMaxTileTokens (8) tokens per pass, for the K-quants: their activations
// (Q8_K) carry float scales, so there is nothing to convert once per tile; what sharing pays for is
// the weight block's decode (nibbles or 6-bit values, scales, permutations), now spread over twice
// as many tokens as VecDotFn's 4 (1B Q4_K prefill, 2 threads: 69 -> 80-88 tok/s).
// Q4_K's tile (tile_q4_K) as rows_of's signature.
template <template <int> class K, int NT>
void rows_tile(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    K<NT>::tile(n, w, wbytes, rows, act, stride, out, os);
}

template <template <int> class K, int NT>
constexpr auto rows_fn() {
    if constexpr (requires { K<NT>::tile; }) return rows_tile<K, NT>;
    else return rows_of<K, NT>;
}

template <template <int> class K>
void rows_by_nt(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, int nt, float* out,
                size_t os) {
    static_assert(kMaxTileTokens == 8);
    switch (nt) {
        case 1: return rows_fn<K, 1>()(n, w, wbytes, rows, act, stride, out, os);
        case 2: return rows_fn<K, 2>()(n, w, wbytes, rows, act, stride, out, os);
        case 3: return rows_fn<K, 3>()(n, w, wbytes, rows, act, stride, out, os);
        case 4: return rows_fn<K, 4>()(n, w, wbytes, rows, act, stride, out, os);
        case 5: return rows_fn<K, 5>()(n, w, wbytes, rows, act, stride, out, os);
        case 6: return rows_fn<K, 6>()(n, w, wbytes, rows, act, stride, out, os);
        case 7: return rows_fn<K, 7>()(n, w, wbytes, rows, act, stride, out, os);
        default: return rows_fn<K, 8>()(n, w, wbytes, rows, act, stride, out, os);
    }
}

}  // namespace

DotTileFn kquant_tile_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_K: return rows_by_nt<KQ4_K>;
        case TensorType::Q6_K: return rows_by_nt<KQ6_K>;
        default: return nullptr;
    }
}

VecDotFn vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_0: return by_nt<KQ4_0>;
        case TensorType::Q8_0: return by_nt<KQ8_0>;
        case TensorType::Q4_1: return by_nt<KQ4_1>;
        case TensorType::Q5_0: return by_nt<KQ5_0>;
        case TensorType::Q5_1: return by_nt<KQ5_1>;
        case TensorType::Q4_K: return by_nt<KQ4_K>;
        case TensorType::Q6_K: return by_nt<KQ6_K>;
        case TensorType::F32: return by_nt<KF32>;
        case TensorType::F16: return by_nt<KF16>;
        case TensorType::BF16: return by_nt<KBF16>;
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx512
