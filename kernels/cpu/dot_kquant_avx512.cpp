// AVX-512 K-quant dot kernels (dot.h): Q4_K, Q5_K and Q6_K weights against Q8_K activations, the
// VecDotFn and the DotTileFn (8 tokens per pass) of each. Compiled with AVX-512 flags; called only
// when active_isa() == Isa::Avx512.
//
// Tokens go in pairs (t, u). A token's block dot comes out of vpdpbusd (u8 x s8, products summed
// in fours) in int32 lanes that each belong to one scale's sub-block; |lane| fits int16, so
// vpackssdw packs the pair's two vectors exactly into one and one vpdpwssd applies the 6- or 8-bit
// scales to both tokens. The pair's int32 sums come out as [t, t, u, u] in every 128-bit lane;
// the float accumulator keeps that layout, the block scale d_x d_y as a vector of it (KAct::dy),
// and one transpose-and-add per row sums the tokens' lanes (pair_finish). The multiply port
// (vpdpbusd, vpdpwssd, vpmaddubsw and the int -> float conversion share it) is what bounds these
// kernels: one token at a time, Q4_K took 14 of its uops per two tokens and block, paired 11;
// Q6_K 18 + the correction's, paired 13. (Q5_K had no AVX-512 kernel: the AVX2 one ran.)
//
// Per tile the activations are copied block-major (KAct: a block's operands for all the tile's
// tokens at fixed offsets from one pointer; Q4_K's also reordered, below) with the per-pair
// vectors, once for every row of the tile (128 in matmul.cpp). The VecDotFn prepares them per
// call and runs the same row function, so tile and row kernels agree bit for bit (tst_quant
// tileEqualsRowKernel): pairs are tokens (0, 1), (2, 3), ... of a call, and VecDotFn calls start
// at multiples of 4.
//
// Threading contract: pure; the activation scratch is thread_local.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_avx512_helpers.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx512 {

namespace {

using namespace helpers;

enum class KQ { Q4_K, Q5_K, Q6_K };

// Per tile, for NT tokens of nb blocks, block-major:
//   qs: (nb, NT) x 256 bytes. Q6_K: the block's values in order. Q4_K: 16-value pieces {0,2,4,6},
//       {1,3,5,7}, {8,..,14}, {9,..,15} (its kernel's sub-block-per-lane order, below);
//   dy: (nb, pairs) vectors of 16 floats, d_y in the [t, t, u, u] layout (0 for a missing u);
//   am (Q4_K): (nb, pairs) x 16 floats, the mins' activation side d_y bsum8_j, lane 4L + 2s + e:
//       token s of the pair, sub-block 2L + e;
//   bs (Q6_K): (nb, pairs) x 32 int16, -bsum_g (16-value sums), lane 8L + 4s + m: token s,
//       sub-block 4L + m.
struct KAct {
    std::vector<int8_t> qs;
    std::vector<float> dy, am;
    std::vector<int16_t> bs;
};

KAct& act_scratch() {
    thread_local KAct s;
    return s;
}

// The activation side of Q4_K's mins for one token and block: d_y * bsum8_j, j = 0..7.
inline __m256 q4k_act_mins(const BlockQ8_K& yb) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.bsums));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(b, _mm256_set1_epi16(1))), _mm256_set1_ps(yb.d));
}

template <int NT, KQ K>
void prepare(const void* act, size_t stride, int64_t nb, KAct& a) {
    constexpr int NP = (NT + 1) / 2;
    a.qs.resize(static_cast<size_t>(NT * nb * 256));
    a.dy.resize(static_cast<size_t>(NP * nb * 16));
    if constexpr (K != KQ::Q6_K) a.am.resize(static_cast<size_t>(NP * nb * 16));
    else a.bs.resize(static_cast<size_t>(NP * nb * 32));
    for (int t = 0; t < NT; ++t) {
        const BlockQ8_K* y = row<BlockQ8_K>(act, stride, t);
        for (int64_t i = 0; i < nb; ++i) {
            int8_t* o = a.qs.data() + (i * NT + t) * 256;
            if constexpr (K == KQ::Q6_K) {
                std::memcpy(o, y[i].qs, 256);
                continue;
            }
            for (int h = 0; h < 2; ++h) {
                const __m512i y0 = _mm512_loadu_si512(y[i].qs + 128 * h);
                const __m512i y1 = _mm512_loadu_si512(y[i].qs + 128 * h + 64);
                _mm512_storeu_si512(o + 128 * h, _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_storeu_si512(o + 128 * h + 64, _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
    }
    const __m512i mins_idx = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i bsum_idx = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    for (int p = 0; p < NP; ++p) {
        const BlockQ8_K* y0 = row<BlockQ8_K>(act, stride, 2 * p);
        const BlockQ8_K* y1 = 2 * p + 1 < NT ? row<BlockQ8_K>(act, stride, 2 * p + 1) : nullptr;
        for (int64_t i = 0; i < nb; ++i) {
            _mm512_storeu_ps(a.dy.data() + (i * NP + p) * 16,
                             _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(y0[i].d),
                                                  _mm512_set1_ps(y1 ? y1[i].d : 0.0f)));
            if constexpr (K != KQ::Q6_K) {
                const __m512 m0 = _mm512_castps256_ps512(q4k_act_mins(y0[i]));
                const __m512 m1 = y1 ? _mm512_castps256_ps512(q4k_act_mins(y1[i])) : _mm512_setzero_ps();
                _mm512_storeu_ps(a.am.data() + (i * NP + p) * 16, _mm512_permutex2var_ps(m0, mins_idx, m1));
            } else {
                auto bsums = [](const BlockQ8_K* y) {
                    return y ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->bsums)))
                             : _mm512_setzero_si512();
                };
                const __m512i b = _mm512_permutex2var_epi64(bsums(y0 + i), bsum_idx, bsums(y1 ? y1 + i : nullptr));
                _mm512_storeu_si512(a.bs.data() + (i * NP + p) * 32, _mm512_sub_epi16(_mm512_setzero_si512(), b));
            }
        }
    }
}

// The 8 (or fewer) tokens' sums from the pairs' accumulators (lanes [t, t, u, u] per 128 bits):
// out[t * os], t < NT.
template <int NT>
inline void pair_finish(const __m512 (&acc)[(NT + 1) / 2], float* out, size_t os) {
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

// ---- Q4_K: sum = d d_y sum_j sc_j (q_j . y_j) - dmin sum_j m_j (d_y bsum8_j), j the 8 sub-blocks
// of 32. Per token and block, 4 vpdpbusd leave the block's dot in two vectors whose int32 lanes
// each belong to one sub-block for the whole block: A holds sub-blocks 0..3 (128-bit lane L:
// sub-block L, 4 lanes of 8 products each), B sub-blocks 4..7. That takes both operands
// reordered: the weights' nibbles per row and block, 16-value pieces moved between 128-bit lanes
// (4 vpermt2q, shared by the tile's tokens), the activations once per tile (KAct::qs).
// |lane| <= 8 * 15 * 128 fits int16: vpackssdw packs A_t, A_u (and B_t, B_u) exactly, and one
// vpdpwssd per pack applies the 6-bit scales: per pair and block 8 vpdpbusd, 2 vpackssdw,
// 2 vpdpwssd, 1 conversion and 2 FMAs, the mins' terms (dmin m_j) (d_y bsum8_j) subtracted in
// the same accumulator (KAct::am).
// Bench (one core, 128-row tiles x 2048, 8 tokens; the project's flags, this host): 72 -> 100
// GMAC/s against one token at a time (8192-wide rows: 72 -> 101), the same error against an exact
// reference.
// Q5_K is the same with a fifth bit added to each value before the reorder (q in 0..31:
// |lane| <= 8 * 31 * 128 still fits int16); its scales and mins are packed as Q4_K's.
//
// One weight row x NT tokens over blocks [i0, i1) (i1 < 0: to the end), with prepare's
// activations. Unless i1 is the end, the accumulators continue from and stay in `state` (pairs
// vectors of 16 floats): the row's sums in pieces, each lane's FMAs in the order of one pass.
template <int NT, KQ K>
void dot_q45_K_rows(int64_t n, const void* wv, const KAct& a, float* out, size_t os, int64_t i0 = 0,
                    int64_t i1 = -1, float* state = nullptr) {
    static_assert(NT <= 8 && K != KQ::Q6_K);
    using WB = std::conditional_t<K == KQ::Q5_K, BlockQ5_K, BlockQ4_K>;
    const auto* x = static_cast<const WB*>(wv);
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
        prefetch_ahead<sizeof(WB), NT>(x + i);
        uint64_t sc, mn;
        q4k_scale_min_words(x[i].scales, &sc, &mn);
        const __m512i sc512 =
            _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
        const __m512i sv0 = _mm512_permutexvar_epi16(sidx0, sc512), sv1 = _mm512_permutexvar_epi16(sidx1, sc512);
        __m512i q[4];
        for (int h = 0; h < 2; ++h) {
            const __m512i b = _mm512_loadu_si512(x[i].qs + 64 * h);
            __m512i lo = _mm512_and_si512(b, m4), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
            if constexpr (K == KQ::Q5_K) {
                // Value e of sub-block s has its fifth bit at bit s of qh[e]: lo holds sub-blocks
                // 4h (bytes 0..31) and 4h + 2, hi 4h + 1 and 4h + 3.
                const __m512i qh =
                    _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh)));
                const __m512i blo = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(char(1 << (4 * h))),
                                                           _mm512_set1_epi8(char(4 << (4 * h))));
                const __m512i sixteen = _mm512_set1_epi8(16);
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, blo), lo, sixteen);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, _mm512_add_epi8(blo, blo)), hi, sixteen);
            }
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
    pair_finish<NT>(acc, out, os);
}

// ---- Q6_K: sum = d d_y sum_g sc_g sum_{i in g} (q_i - 32) y_i, g the 16 sub-blocks of 16,
// q in 0..63. Per token and 64-value chunk k one vpdpbusd (q u8 x y s8): 128-bit lane L holds
// sub-block 4k + L, each lane 4 products, |lane| <= 4 * 63 * 128 fits int16; the pair's chunks
// pack to int16 and vpdpwssd applies the 8-bit scales (4 per pair and block). The -32 goes in as
// one more vpdpwssd per pair: -bsum_g (KAct::bs) x 32 sc_g, int16 lanes laid out to land in the
// same [t, t, u, u] int32 lanes. Per pair and block 8 vpdpbusd, 4 vpackssdw, 5 vpdpwssd, 1
// conversion, 1 FMA, where one token at a time took 4 vpmaddubsw + 4 vpdpwssd + the correction +
// 1 conversion per token.
// Q6_K helpers shared by the paired and the one-token kernels.
// Lane j of permutation k picks scale 4k + j / 8: in chunk k (values 64k..64k+63) int16 lane j
// (one vpackssdw / vpmaddubsw lane) belongs to sub-block 4k + j / 8.
inline void q6k_scale_idx(__m512i (&idx)[4]) {
    for (int k = 0; k < 4; ++k) {
        alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; ++j) ix[j] = static_cast<int16_t>(4 * k + j / 8);
        idx[k] = _mm512_load_si512(ix);
    }
}

// The block's values q in 0..63, in order: q[k] = values 64k..64k+63.
inline void q6k_unpack(const BlockQ6_K& b, __m512i (&q)[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh2, m30));
    }
}

template <int NT>
void dot_q6_K_rows(int64_t n, const void* wv, const KAct& a, float* out, size_t os, int64_t i0 = 0,
                   int64_t i1 = -1, float* state = nullptr) {
    static_assert(NT <= 8);
    const auto* x = static_cast<const BlockQ6_K*>(wv);
    const int64_t nb = n / kQK_K;
    constexpr int NP = (NT + 1) / 2;
    __m512 acc[NP];
    for (int p = 0; p < NP; ++p) acc[p] = i0 > 0 ? _mm512_loadu_ps(state + 16 * p) : _mm512_setzero_ps();
    if (i1 < 0) i1 = nb;
    // Pack lane j (128-bit lane j / 8) of chunk k: sub-block 4k + j / 8. The correction's lane j:
    // sub-block 4 (j / 8) + j % 4.
    __m512i idx[4];
    q6k_scale_idx(idx);
    __m512i cidx;
    {
        alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; ++j) ix[j] = static_cast<int16_t>(4 * (j / 8) + j % 4);
        cidx = _mm512_load_si512(ix);
    }
    for (int64_t i = i0; i < i1; ++i) {
        prefetch_ahead<sizeof(BlockQ6_K), NT>(x + i);
        const __m512i sc512 = _mm512_zextsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales))));
        __m512i q[4], sv[4];
        q6k_unpack(x[i], q);
        for (int k = 0; k < 4; ++k) sv[k] = _mm512_permutexvar_epi16(idx[k], sc512);
        const __m512i scv = _mm512_slli_epi16(_mm512_permutexvar_epi16(cidx, sc512), 5);  // 32 sc, |.| <= 4096
        const __m512 dx = _mm512_set1_ps(h2f(x[i].d));
        const int8_t* yb = a.qs.data() + static_cast<size_t>(i * NT) * 256;
        const float* dyb = a.dy.data() + static_cast<size_t>(i * NP) * 16;
        const int16_t* bsb = a.bs.data() + static_cast<size_t>(i * NP) * 32;
        for (int p = 0; p < NP; ++p) {
            const int8_t* yt = yb + 2 * p * 256;
            __m512i sumi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(bsb + 32 * p), scv);
            for (int k = 0; k < 4; ++k) {
                const __m512i dt = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], _mm512_loadu_si512(yt + 64 * k));
                const __m512i du = 2 * p + 1 < NT ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k],
                                                                        _mm512_loadu_si512(yt + 256 + 64 * k))
                                                  : _mm512_setzero_si512();
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(dt, du), sv[k]);
            }
            const __m512 scale = _mm512_mul_ps(dx, _mm512_loadu_ps(dyb + 16 * p));
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), scale, acc[p]);
        }
    }
    if (i1 < nb) {
        for (int p = 0; p < NP; ++p) _mm512_storeu_ps(state + 16 * p, acc[p]);
        return;
    }
    pair_finish<NT>(acc, out, os);
}

// One token (decode, and the odd token of an odd count), Q6_K: the block's 4 vpmaddubsw + 4
// vpdpwssd, the -32 as 32 sum_g sc_g bsum_g (one vpmaddwd), one FMA. The paired kernel, half of
// whose lanes would be empty here, measured 10 % slower for one token (one core, 128-row tiles x
// 2048). Tile and row kernels both take an odd count's last token here, so they still agree.
void dot_q6_K_one(int64_t n, const void* wv, const void* act, float* out) {
    const auto* x = static_cast<const BlockQ6_K*>(wv);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    const int64_t nb = n / kQK_K;
    __m512 acc = _mm512_setzero_ps();
    __m512i idx[4];
    q6k_scale_idx(idx);
    for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead<sizeof(BlockQ6_K), 1>(x + i);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
        const __m512i sc512 = _mm512_zextsi256_si512(sc16);
        __m512i q[4];
        q6k_unpack(x[i], q);
        __m512i sumi = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
            const __m512i p16 = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(y[i].qs + 64 * k));
            sumi = _mm512_dpwssd_epi32(sumi, p16, _mm512_permutexvar_epi16(idx[k], sc512));
        }
        const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)), sc16);
        sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *out = _mm512_reduce_add_ps(acc);
}

template <int NT, KQ K>
void rows_k(int64_t n, const void* w, const KAct& a, float* out, size_t os, int64_t i0 = 0, int64_t i1 = -1,
            float* state = nullptr) {
    if constexpr (K != KQ::Q6_K) dot_q45_K_rows<NT, K>(n, w, a, out, os, i0, i1, state);
    else dot_q6_K_rows<NT>(n, w, a, out, os, i0, i1, state);
}

// VecDotFn body: one row, the activations prepared per call.
template <int NT, KQ K>
void row_dot(int64_t n, const void* w, const void* act, size_t stride, float* out, size_t os) {
    if constexpr (K == KQ::Q6_K && NT % 2 == 1) {  // the odd token alone, as the tile does
        if constexpr (NT > 1) row_dot<NT - 1, K>(n, w, act, stride, out, os);
        return dot_q6_K_one(n, w, static_cast<const char*>(act) + (NT - 1) * stride, out + (NT - 1) * os);
    }
    KAct& a = act_scratch();
    prepare<NT, K>(act, stride, n / kQK_K, a);
    rows_k<NT, K>(n, w, a, out, os);
}

// DotTileFn body: the activations once, then every row. Rows longer than kChunk blocks go in
// pieces of that many blocks, every row's piece before the next piece: NT tokens' activations for
// a piece (8 tokens x 8 blocks: 18 KB) stay in L1 while the rows pass over them, where a whole
// ffn_down row's (8192 wide: 75 KB) came from L2 for each row (one core, 8192 x 256 rows, 64
// tokens, one token at a time: 57 -> 70 GMAC/s; 2048-wide rows: 72).
// Activations up to kWholeRowBytes stay in L1 anyway: rows go whole (one token, decode: in
// pieces the rows' weights no longer stream in order, -8 % decode on the 1B model).
constexpr int64_t kChunk = 8;
constexpr int64_t kWholeRowBytes = 24 * 1024;

template <int NT, KQ K>
void tile(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out, size_t os) {
    auto row_w = [&](int r) { return static_cast<const char*>(w) + static_cast<size_t>(r) * wbytes; };
    if constexpr (K == KQ::Q6_K && NT % 2 == 1) {  // pairs, then the odd token by dot_q6_K_one
        if constexpr (NT > 1) tile<NT - 1, K>(n, w, wbytes, rows, act, stride, out, os);
        const char* last = static_cast<const char*>(act) + (NT - 1) * stride;
        for (int r = 0; r < rows; ++r) dot_q6_K_one(n, row_w(r), last, out + (NT - 1) * os + r);
        return;
    }
    const int64_t nb = n / kQK_K;
    KAct& a = act_scratch();
    prepare<NT, K>(act, stride, nb, a);
    if (nb <= kChunk || NT * nb * static_cast<int64_t>(sizeof(BlockQ8_K)) <= kWholeRowBytes) {
        for (int r = 0; r < rows; ++r) rows_k<NT, K>(n, row_w(r), a, out + r, os);
        return;
    }
    constexpr int kState = 16 * ((NT + 1) / 2);
    thread_local std::vector<float> state;
    state.resize(static_cast<size_t>(rows * kState));
    for (int64_t i0 = 0; i0 < nb; i0 += kChunk) {
        const int64_t i1 = std::min(nb, i0 + kChunk);
        for (int r = 0; r < rows; ++r)
            rows_k<NT, K>(n, row_w(r), a, out + r, os, i0, i1, state.data() + static_cast<size_t>(r) * kState);
    }
}

template <KQ K>
void row_by_nt(int64_t n, const void* w, const void* act, size_t stride, int nt, float* out, size_t os) {
    static_assert(kMaxDotTokens == 4);
    switch (nt) {
        case 1: return row_dot<1, K>(n, w, act, stride, out, os);
        case 2: return row_dot<2, K>(n, w, act, stride, out, os);
        case 3: return row_dot<3, K>(n, w, act, stride, out, os);
        default: return row_dot<4, K>(n, w, act, stride, out, os);
    }
}

template <KQ K>
void tile_by_nt(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, int nt, float* out,
                size_t os) {
    static_assert(kMaxTileTokens == 8);
    switch (nt) {
        case 1: return tile<1, K>(n, w, wbytes, rows, act, stride, out, os);
        case 2: return tile<2, K>(n, w, wbytes, rows, act, stride, out, os);
        case 3: return tile<3, K>(n, w, wbytes, rows, act, stride, out, os);
        case 4: return tile<4, K>(n, w, wbytes, rows, act, stride, out, os);
        case 5: return tile<5, K>(n, w, wbytes, rows, act, stride, out, os);
        case 6: return tile<6, K>(n, w, wbytes, rows, act, stride, out, os);
        case 7: return tile<7, K>(n, w, wbytes, rows, act, stride, out, os);
        default: return tile<8, K>(n, w, wbytes, rows, act, stride, out, os);
    }
}

}  // namespace

DotTileFn kquant_tile_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_K: return tile_by_nt<KQ::Q4_K>;
        case TensorType::Q5_K: return tile_by_nt<KQ::Q5_K>;
        case TensorType::Q6_K: return tile_by_nt<KQ::Q6_K>;
        default: return nullptr;
    }
}

VecDotFn kquant_vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_K: return row_by_nt<KQ::Q4_K>;
        case TensorType::Q5_K: return row_by_nt<KQ::Q5_K>;
        case TensorType::Q6_K: return row_by_nt<KQ::Q6_K>;
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx512
