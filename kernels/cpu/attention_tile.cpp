#include "kernels/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"

namespace sl::kernels {

void transpose_keys(float* kt, int64_t ldk, const float* k, int64_t k_stride, int n, int d) {
    const int64_t cols = tile_ldk(n);
    for (int c = 0; c < d; ++c) {
        float* dst = kt + c * ldk;
        for (int j = 0; j < n; ++j) dst[j] = k[j * k_stride + c];
        std::fill(dst + n, dst + cols, 0.0f);
    }
}

namespace ref {

void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum) {
    for (int r = 0; r < R; ++r) {
        float* pr = p + r * ldp;
        float* ar = acc + static_cast<int64_t>(r) * d;
        float bm = -INFINITY;
        for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int c = 0; c < d; ++c) s += static_cast<double>(q[r][c]) * kt[c * ldk + j];
            pr[j] = static_cast<float>(s) * scale;
            bm = std::max(bm, pr[j]);
        }
        if (bm > m[r]) {
            const float f = std::exp(m[r] - bm);
            for (int c = 0; c < d; ++c) ar[c] *= f;
            l[r] *= f;
            m[r] = bm;
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) {
            pr[j] = std::exp(pr[j] - m[r]);
            sum += pr[j];
        }
        for (int c = 0; c < d; ++c) {
            double a = ar[c];
            for (int j = 0; j < n; ++j) a += static_cast<double>(pr[j]) * v[j * v_stride + c];
            ar[c] = static_cast<float>(a);
        }
        bsum[r] = static_cast<float>(sum);
        l[r] += bsum[r];
    }
}

float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float*, int64_t) {
    float best = -INFINITY;
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int c = 0; c < d; ++c) s = std::fma(q[r][c], kt[c * ldk + j], s);
            best = std::max(best, s);
        }
    return best;
}

}  // namespace ref

float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp) {
    const Isa isa = active_isa();
    if (isa == Isa::Avx512 && d % 16 == 0) return avx512::max_dot_tile(R, q, kt, ldk, n, d, p, ldp);
    if (isa >= Isa::Avx2 && d % 8 == 0) return avx2::max_dot_tile(R, q, kt, ldk, n, d, p, ldp);
    return ref::max_dot_tile(R, q, kt, ldk, n, d, p, ldp);
}

float attend_row(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride, int n, int d,
                 float scale, float& m, float& l, float* acc, float* p) {
    dot_rows_f32(p, q, k, k_stride, n, d, scale);
    float bm = -INFINITY;
    for (int j = 0; j < n; ++j) bm = std::max(bm, p[j]);
    if (bm > m) {
        const float f = std::exp(m - bm);
        for (int c = 0; c < d; ++c) acc[c] *= f;
        l *= f;
        m = bm;
    }
    const float sum = exp_shifted_sum(p, n, m);  // p <- exp(s - m)
    accumulate_rows_f32(acc, p, v, v_stride, n, d);
    l += sum;
    return sum;
}

void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum) {
    const Isa isa = active_isa();
    if (isa == Isa::Avx512 && d % 16 == 0)
        return avx512::attend_tile(R, q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
    if (isa >= Isa::Avx2 && d % 8 == 0)
        return avx2::attend_tile(R, q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
    ref::attend_tile(R, q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
}

}  // namespace sl::kernels
