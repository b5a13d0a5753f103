// One attention layer's activations at the end of a long prefill: written by tst_msa_recall
// (SIGHTLINE_MSA_RECALL_DUMP), read by bench_attention (SIGHTLINE_BENCH_REAL) to time the layer on
// real SmolLM2 activations. File (host byte order, f32 data):
//   header: 16 int64 (kActivationDumpMagic, layer, n_ctx, n_head, n_kv_head, head_dim, n_q,
//           rope_dim, rope_neox, then the bits of the floats scale, rope_base, rope_freq_scale in
//           the low 32 bits of the next three; the rest 0);
//   queries of the call's last n_q tokens: (n_q, n_head, head_dim), RoPE'd;
//   K, then V, of every position: (n_ctx, n_kv_head * head_dim) each, as KvCache::read gives them.
// Header-only, no Qt: the benchmark does not link the test support library.
#pragma once

#include <cstdint>
#include <cstring>

namespace sl::test {

inline constexpr int64_t kActivationDumpMagic = 0x504d55445653;
inline constexpr int kActivationDumpHeaderWords = 16;

struct ActivationDump {
    int layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, n_q = 0, rope_dim = 0, rope_neox = 0;
    int64_t n_ctx = 0;
    float scale = 1.0f, rope_base = 10000.0f, rope_freq_scale = 1.0f;
};

inline void pack_activation_dump(const ActivationDump& d, int64_t h[kActivationDumpHeaderWords]) {
    auto bits = [](float f) {
        int32_t b;
        std::memcpy(&b, &f, 4);
        return static_cast<int64_t>(b);
    };
    const int64_t w[kActivationDumpHeaderWords] = {kActivationDumpMagic, d.layer,      d.n_ctx,        d.n_head,
                                                   d.n_kv_head,          d.head_dim,   d.n_q,          d.rope_dim,
                                                   d.rope_neox,          bits(d.scale), bits(d.rope_base),
                                                   bits(d.rope_freq_scale)};
    std::memcpy(h, w, sizeof w);
}

// False when the words are not a dump's header (magic, positive sizes, whole GQA groups,
// n_q <= n_ctx).
inline bool unpack_activation_dump(const int64_t h[kActivationDumpHeaderWords], ActivationDump& d) {
    if (h[0] != kActivationDumpMagic || h[2] <= 0 || h[3] <= 0 || h[4] <= 0 || h[5] <= 0 || h[6] <= 0 ||
        h[3] % h[4] != 0 || h[6] > h[2])
        return false;
    auto flt = [](int64_t b) {
        const auto u = static_cast<int32_t>(b);
        float x;
        std::memcpy(&x, &u, 4);
        return x;
    };
    d.layer = static_cast<int>(h[1]);
    d.n_ctx = h[2];
    d.n_head = static_cast<int>(h[3]);
    d.n_kv_head = static_cast<int>(h[4]);
    d.head_dim = static_cast<int>(h[5]);
    d.n_q = static_cast<int>(h[6]);
    d.rope_dim = static_cast<int>(h[7]);
    d.rope_neox = static_cast<int>(h[8]);
    d.scale = flt(h[9]);
    d.rope_base = flt(h[10]);
    d.rope_freq_scale = flt(h[11]);
    return true;
}

}  // namespace sl::test
