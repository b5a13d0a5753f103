#include "core/attention/rope_shift.h"

#include <cmath>
#include <string>

#include "core/attention/attention.h"
#include "core/util/error.h"

namespace sl {

RopeShift::RopeShift(int head_dim, int rot_dim, float base, float freq_scale, bool neox, const float* freq_factors)
    : head_dim_(head_dim), rot_dim_(rot_dim), neox_(neox), base_(base), freq_scale_(freq_scale) {
    if (rot_dim <= 0 || rot_dim > head_dim || rot_dim % 2 != 0)
        throw Error("RoPE shift: rotated dims " + std::to_string(rot_dim) + " do not fit head dim " +
                    std::to_string(head_dim) + " (even, 1..head dim)");
    inv_freq_.resize(static_cast<size_t>(rot_dim / 2));
    for (size_t i = 0; i < inv_freq_.size(); ++i)
        inv_freq_[i] = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / rot_dim) * freq_scale /
                       (freq_factors ? static_cast<double>(freq_factors[i]) : 1.0);
}

RopeShift RopeShift::of(const AttentionCall& c) {
    if (c.rope_dim <= 0) return {};
    return RopeShift(c.head_dim, c.rope_dim, c.rope_base, c.rope_freq_scale, c.rope_neox != 0, c.rope_freq_factors);
}

bool RopeShift::same(const RopeShift& o) const {
    return head_dim_ == o.head_dim_ && rot_dim_ == o.rot_dim_ && neox_ == o.neox_ && base_ == o.base_ &&
           freq_scale_ == o.freq_scale_ && inv_freq_ == o.inv_freq_;
}

void RopeShift::rotate(float* rows, int64_t n, int64_t stride, int64_t delta, std::vector<float>& cs) const {
    if (!active() || delta == 0) return;
    const int half = rot_dim_ / 2;
    cs.resize(static_cast<size_t>(rot_dim_));
    for (int i = 0; i < half; ++i) {
        const double a = static_cast<double>(delta) * inv_freq_[static_cast<size_t>(i)];
        cs[static_cast<size_t>(2 * i)] = static_cast<float>(std::cos(a));
        cs[static_cast<size_t>(2 * i + 1)] = static_cast<float>(std::sin(a));
    }
    for (int64_t r = 0; r < n; ++r) {
        float* x = rows + r * stride;
        for (int i = 0; i < half; ++i) {
            const int a = neox_ ? i : 2 * i, b = neox_ ? i + half : 2 * i + 1;
            const float c = cs[static_cast<size_t>(2 * i)], s = cs[static_cast<size_t>(2 * i + 1)];
            const float x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

}  // namespace sl
