// Rotations of RoPE'd rows by a position shift, for MSA's position remapping
// (MsaConfig::positions = Remap). RoPE composes: a row carrying the rotation of position p,
// rotated by delta, carries that of p + delta. Remap scores a query at position p against a far
// block's key at p_j = b*B + i as if the query sat at b*B + W (distance W - i). With
//   q^ = R(W - p) q      (the query as if at position W; per row, once), and
//   k^ = R(-b*B) k       (the key as if its block began at position 0; per block, once),
// q^ · k^ is exactly that remapped score, for every far block. So the index branch keeps
// block-relative summaries of k^ (BlockIndex) and the sparse branch rotates each far block's keys
// once instead of every query once per block. When a call has fewer query rows than a block has
// keys (decode), both branches rotate the rows instead: R(b*B) q^ · k = q^ · k^.
//
// Pairing and frequencies as the model's RoPE (kernels::rope): dims [0, rot_dim) rotate, adjacent
// pairs (2i, 2i+1) or NeoX halves (i, i + rot_dim/2), theta_i = base^(-2i/rot_dim) * freq_scale;
// dims past rot_dim are left alone. Pure and thread-safe after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace sl {

struct AttentionCall;

class RopeShift {
public:
    RopeShift() = default;  // inactive
    // freq_factors: rot_dim / 2 divisors of the frequencies (Llama 3.1's rope_freqs), or null.
    RopeShift(int head_dim, int rot_dim, float base, float freq_scale, bool neox, const float* freq_factors = nullptr);
    // The RoPE an attention call's q and k carry (inactive when the call names none).
    static RopeShift of(const AttentionCall& call);

    bool active() const { return rot_dim_ > 0; }
    int head_dim() const { return head_dim_; }
    // Same rotation as `o` (what a block index built with one can be reused for).
    bool same(const RopeShift& o) const;

    // Rotates n rows (head_dim floats each, `stride` floats apart) in place by `delta` positions.
    // `cs` is caller scratch of rot_dim floats (reused; cos/sin of delta * theta_i).
    void rotate(float* rows, int64_t n, int64_t stride, int64_t delta, std::vector<float>& cs) const;

private:
    int head_dim_ = 0, rot_dim_ = 0;
    bool neox_ = false;
    float base_ = 0, freq_scale_ = 0;
    std::vector<double> inv_freq_;  // (rot_dim / 2)
};

}  // namespace sl
