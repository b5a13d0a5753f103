// A random-weight Llama of a given shape with Q4_K matrices (F32 norms), built in memory — no
// file: a LlamaModel over buffers this object owns. For measurements at sizes no file here can
// carry (bench_cuda_msa's 8B Q4_K row: the goal's "a random-weight 8B Llama 3 shape in Q4_K")
// and their check on the CPU (tst_random_llama). Deterministic for a seed; matrices are filled on
// the host's cores (an 8B shape is ~4.5 GB).
//
// Q4_K values are d * sc * q - dmin * m (sc, m uniform 6-bit, q uniform 4-bit): with d = 7.8e-5
// and dmin = 5.7e-4 the weights have a mean near 0 and a spread of ~0.02 (about half of it an
// offset shared by each 32 values), so activations stay finite over many layers (their values
// mean nothing; only the shape and the type matter). The same weights for a seed on any machine
// (the random stream is seeded per fixed chunk of blocks, not per thread).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/model/llama_model.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/tensor_types.h"

namespace sl::test {

struct RandomLlama {
    std::vector<std::vector<kernels::BlockQ4_K>> matrices;
    std::vector<std::vector<float>> norms;
    std::unique_ptr<LlamaModel> model;
};

// c: a llama shape (arch, n_layer, d_model, n_ff, n_head, n_kv_head, head_dim, n_vocab, RoPE);
// d_model and n_ff must be multiples of 256 (Q4_K's super-block), as n_head * head_dim.
inline std::unique_ptr<RandomLlama> make_random_llama(LlamaConfig c, uint64_t seed) {
    auto r = std::make_unique<RandomLlama>();
    if (c.rope_dim == 0) c.rope_dim = c.head_dim;
    for (const int64_t n : {int64_t{c.d_model}, int64_t{c.n_ff}, int64_t{c.n_head} * c.head_dim})
        if (n <= 0 || n % kernels::kQK_K != 0)
            throw Error("random llama: row lengths must be multiples of " + std::to_string(kernels::kQK_K));
    const uint16_t d = kernels::f32_to_f16(7.8e-5f), dmin = kernels::f32_to_f16(5.7e-4f);
    const unsigned cores = std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
    constexpr int64_t kChunk = 1 << 16;  // blocks per seeded chunk
    auto matrix = [&](int64_t ne0, int64_t ne1) {
        const int64_t per_row = ne0 / kernels::kQK_K, n = per_row * ne1, chunks = (n + kChunk - 1) / kChunk;
        r->matrices.emplace_back(static_cast<size_t>(n));
        kernels::BlockQ4_K* b = r->matrices.back().data();
        const uint64_t salt = seed * 0x9e3779b97f4a7c15ull + r->matrices.size();
        auto fill = [&](int64_t c0, int64_t c1) {  // chunks [c0, c1)
            for (int64_t ch = c0; ch < c1; ++ch) {
                uint64_t x = (salt ^ static_cast<uint64_t>(ch) * 0xbf58476d1ce4e5b9ull) | 1;
                auto next = [&x] {  // xorshift64*
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    return x * 0x2545f4914f6cdd1dull;
                };
                for (int64_t i = ch * kChunk; i < std::min(n, (ch + 1) * kChunk); ++i) {
                    kernels::BlockQ4_K& k = b[i];
                    k.d = d;
                    k.dmin = dmin;
                    for (size_t j = 0; j < sizeof k.scales; j += 8) {
                        const uint64_t v = next();
                        std::memcpy(k.scales + j, &v, std::min<size_t>(8, sizeof k.scales - j));
                    }
                    for (size_t j = 0; j < sizeof k.qs; j += 8) {
                        const uint64_t v = next();
                        std::memcpy(k.qs + j, &v, 8);
                    }
                }
            }
        };
        const int64_t per = (chunks + cores - 1) / cores;
        std::vector<std::thread> ts;
        int64_t done = per;  // chunks a thread took; the rest here
        for (unsigned t = 1; t < cores && t * per < chunks; ++t) {
            try {
                ts.emplace_back(fill, t * per, std::min<int64_t>(chunks, (t + 1) * per));
                done = std::min<int64_t>(chunks, (t + 1) * per);
            } catch (const std::system_error&) {
                break;
            }
        }
        fill(0, std::min<int64_t>(chunks, per));
        fill(done, chunks);
        for (auto& t : ts) t.join();
        TensorView v;
        v.type = kernels::TensorType::Q4_K;
        v.data = b;
        v.ne0 = ne0;
        v.ne1 = ne1;
        return v;
    };
    auto ones = [&](int64_t n) {
        r->norms.emplace_back(static_cast<size_t>(n), 1.0f);
        return r->norms.back().data();
    };
    const int64_t dq = static_cast<int64_t>(c.n_head) * c.head_dim, dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    r->matrices.reserve(static_cast<size_t>(c.n_layer) * 7 + 2);  // views point into them: no reallocation
    r->norms.reserve(static_cast<size_t>(c.n_layer) * 2 + 1);
    LlamaWeights w;
    w.tok_embd = matrix(c.d_model, c.n_vocab);
    for (int l = 0; l < c.n_layer; ++l) {
        LlamaLayer L;
        L.attn_norm = ones(c.d_model);
        L.wq = matrix(c.d_model, dq);
        L.wk = matrix(c.d_model, dkv);
        L.wv = matrix(c.d_model, dkv);
        L.wo = matrix(dq, c.d_model);
        L.ffn_norm = ones(c.d_model);
        L.gate = matrix(c.d_model, c.n_ff);
        L.up = matrix(c.d_model, c.n_ff);
        L.down = matrix(c.n_ff, c.d_model);
        w.layers.push_back(L);
    }
    w.output_norm = ones(c.d_model);
    w.output = matrix(c.d_model, c.n_vocab);
    r->model = std::make_unique<LlamaModel>(c, std::move(w));
    return r;
}

// Llama 3.1 8B's shape (32 layers, d 4096, FFN 14336, 32 query / 8 KV heads of 128, vocabulary
// 128,256, RoPE base 500,000, trained to 131,072 tokens).
inline LlamaConfig llama31_8b_shape() {
    LlamaConfig c;
    c.arch = "llama";
    c.n_layer = 32;
    c.d_model = 4096;
    c.n_ff = 14336;
    c.n_head = 32;
    c.n_kv_head = 8;
    c.head_dim = 128;
    c.n_vocab = 128256;
    c.n_ctx_train = 131072;
    c.rms_eps = 1e-5f;
    c.rope_base = 500000.0f;
    c.rope_dim = 128;
    return c;
}

}  // namespace sl::test
