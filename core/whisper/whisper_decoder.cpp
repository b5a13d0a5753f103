#include "core/whisper/whisper_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/ops.h"

namespace sl::whisper {

namespace {

// One query against n keys per head: ctx (d) = softmax(q k_j / sqrt(hd)) v_j, with q's head slice
// at q + h * hd, key j's at k + j * stride + h * hd and value j's at v + j * stride + h * hd.
// `scores` holds n_heads * n floats of scratch. Heads spread over the pool.
void attend(const float* q, const float* k, const float* v, int64_t stride, int64_t n, int64_t d,
            int n_heads, float* ctx, float* scores, ThreadPool& pool) {
    const int64_t hd = d / n_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    pool.parallel_for(n_heads, [&](int64_t h0, int64_t h1, int) {
        for (int64_t h = h0; h < h1; ++h) {
            float* s = scores + h * n;
            kernels::dot_rows_f32(s, q + h * hd, k + h * hd, stride, n, hd, scale);
            kernels::softmax(s, n);
            std::fill_n(ctx + h * hd, hd, 0.0f);
            kernels::accumulate_rows_f32(ctx + h * hd, s, v + h * hd, stride, n, hd);
        }
    });
}

}  // namespace

WhisperDecoder::WhisperDecoder(const WhisperModel& model) : model_(model) {
    const WhisperConfig& c = model.config();
    const auto d = static_cast<size_t>(c.d_model);
    const auto layers = static_cast<size_t>(c.n_text_layers);
    cross_kv_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_audio_ctx) * 2 * d));
    self_k_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_text_ctx) * d));
    self_v_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_text_ctx) * d));
    x_.resize(d);
    h_.resize(d);
    qkv_.resize(3 * d);
    ctx_.resize(d);
    tmp_.resize(d);
    ffn_.resize(static_cast<size_t>(c.n_ffn));
    scores_.resize(static_cast<size_t>(std::max(c.n_audio_ctx, c.n_text_ctx)) *
                   static_cast<size_t>(std::max(c.n_text_heads, 1)));
}

void WhisperDecoder::set_audio(std::span<const float> encoder_out, ThreadPool& pool) {
    const WhisperConfig& c = model_.config();
    const size_t want = static_cast<size_t>(c.n_audio_ctx) * static_cast<size_t>(c.d_model);
    if (encoder_out.size() != want) {
        throw Error("Whisper decoder: encoder output of " + std::to_string(encoder_out.size()) +
                    " values, expected " + std::to_string(want));
    }
    const auto& layers = model_.decoder_layers();
    for (size_t L = 0; L < layers.size(); ++L)
        WhisperModel::apply(layers[L].cross_kv, encoder_out.data(), c.n_audio_ctx,
                            cross_kv_[L].data(), pool);
    have_audio_ = true;
    pos_ = 0;
}

void WhisperDecoder::step(int token, std::vector<float>& logits, ThreadPool& pool) {
    const WhisperConfig& c = model_.config();
    if (!have_audio_) throw Error("Whisper decoder: step() before set_audio()");
    if (token < 0 || token >= c.n_vocab)
        throw Error("Whisper decoder: token " + std::to_string(token) +
                    " is outside the vocabulary");
    if (pos_ >= c.n_text_ctx)
        throw Error("Whisper decoder: the text context of " + std::to_string(c.n_text_ctx) +
                    " tokens is full");
    const int64_t d = c.d_model;
    const float* emb = model_.token_embedding().data();
    const float* pos = model_.text_positions().data();
    float* x = x_.data();
    for (int64_t i = 0; i < d; ++i) x[i] = emb[token * d + i] + pos[pos_ * d + i];

    const auto& layers = model_.decoder_layers();
    const int64_t n_self = pos_ + 1;
    for (size_t L = 0; L < layers.size(); ++L) {
        const DecoderLayer& l = layers[L];
        // Causal self-attention over the cache, this token's K and V appended first.
        std::copy_n(x, d, h_.data());
        WhisperModel::layer_norm(h_.data(), 1, d, l.ln_self, pool);
        WhisperModel::apply(l.self_qkv, h_.data(), 1, qkv_.data(), pool);
        std::copy_n(qkv_.data() + d, d, self_k_[L].data() + pos_ * d);
        std::copy_n(qkv_.data() + 2 * d, d, self_v_[L].data() + pos_ * d);
        attend(qkv_.data(), self_k_[L].data(), self_v_[L].data(), d, n_self, d, c.n_text_heads,
               ctx_.data(), scores_.data(), pool);
        WhisperModel::apply(l.self_out, ctx_.data(), 1, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), d);

        // Cross-attention over the encoder output.
        std::copy_n(x, d, h_.data());
        WhisperModel::layer_norm(h_.data(), 1, d, l.ln_cross, pool);
        WhisperModel::apply(l.cross_q, h_.data(), 1, qkv_.data(), pool);
        const float* kv = cross_kv_[L].data();
        attend(qkv_.data(), kv, kv + d, 2 * d, c.n_audio_ctx, d, c.n_text_heads, ctx_.data(),
               scores_.data(), pool);
        WhisperModel::apply(l.cross_out, ctx_.data(), 1, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), d);

        // Feed-forward.
        std::copy_n(x, d, h_.data());
        WhisperModel::layer_norm(h_.data(), 1, d, l.ln_ffn, pool);
        WhisperModel::apply(l.up, h_.data(), 1, ffn_.data(), pool);
        kernels::gelu_erf(ffn_.data(), c.n_ffn);
        WhisperModel::apply(l.down, ffn_.data(), 1, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), d);
    }
    std::copy_n(x, d, h_.data());
    WhisperModel::layer_norm(h_.data(), 1, d, model_.decoder_norm(), pool);
    // Tied output projection: logits[j] = emb[j] . h, rows spread over the pool.
    logits.resize(static_cast<size_t>(c.n_vocab));
    pool.parallel_for(
        c.n_vocab,
        [&](int64_t r0, int64_t r1, int) {
            kernels::dot_rows_f32(logits.data() + r0, h_.data(), emb + r0 * d, d, r1 - r0, d, 1.0f);
        },
        64);
    ++pos_;
}

namespace {

// CTranslate2's ApplyTimestampRules for the step after `generated` (the tokens sampled so far):
// sets disallowed logits to -inf. Runs after the suppression lists.
void apply_timestamp_rules(std::vector<float>& logits, const std::vector<int>& generated,
                           const WhisperTokens& t, int max_initial_index) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const int tb = t.timestamp_begin;
    const int n = static_cast<int>(logits.size());
    auto block = [&](int from, int to) {  // [from, to)
        std::fill(logits.begin() + std::max(from, 0), logits.begin() + std::min(to, n), neg_inf);
    };
    block(t.no_timestamps, t.no_timestamps + 1);
    if (generated.empty()) {
        block(0, tb);                          // the first token is a timestamp
        block(tb + max_initial_index + 1, n);  // no later than the initial limit
        return;
    }
    bool check_prob = true;
    const int last = generated.back();
    if (last >= tb) {
        const int penultimate = generated.size() >= 2 ? generated[generated.size() - 2] : last;
        if (penultimate >= tb) {
            block(tb, n);  // a pair just closed: text or end next
            check_prob = false;
        } else {
            block(0, t.eot);  // an opening timestamp: another timestamp or the end next
        }
    }
    // Timestamps never decrease.
    for (auto it = generated.rbegin(); it != generated.rend(); ++it) {
        if (*it >= tb) {
            block(tb, *it);
            break;
        }
    }
    if (!check_prob) return;
    // If the timestamps together are likelier than any single text token, force a timestamp.
    const float mx = *std::max_element(logits.begin(), logits.end());
    if (!std::isfinite(mx)) return;
    double z = 0, zt = 0;
    float max_text = neg_inf;
    for (int i = 0; i < n; ++i) {
        const double e = std::exp(static_cast<double>(logits[static_cast<size_t>(i)]) - mx);
        z += e;
        if (i >= tb)
            zt += e;
        else
            max_text = std::max(max_text, logits[static_cast<size_t>(i)]);
    }
    const double log_z = std::log(z) + mx;
    const double timestamp_logprob = zt > 0 ? std::log(zt) + mx - log_z : -INFINITY;
    const double max_text_logprob = static_cast<double>(max_text) - log_z;
    if (timestamp_logprob > max_text_logprob) block(0, tb);
}

}  // namespace

GreedyResult greedy_decode(WhisperDecoder& decoder, std::span<const int> prompt,
                           const GreedyOptions& options, ThreadPool& pool) {
    if (prompt.empty()) throw Error("Whisper greedy decoding: empty prompt");
    const WhisperModel& m = decoder.model();
    const WhisperTokens& tk = m.tokens();
    const int eot = tk.eot;
    const bool timestamps = prompt.back() != tk.no_timestamps;
    const int start_step = static_cast<int>(prompt.size()) - 1;
    const int max_new = std::min(options.max_length / 2, options.max_length - start_step);

    GreedyResult r;
    std::vector<float> logits;
    decoder.reset();
    for (const int t : prompt) {
        decoder.step(t, logits, pool);
        if (t == tk.sot) {  // the no-speech probability, from the raw logits after sot
            const float mx = *std::max_element(logits.begin(), logits.end());
            double z = 0;
            for (const float v : logits) z += std::exp(static_cast<double>(v) - mx);
            r.no_speech_prob = static_cast<float>(
                std::exp(static_cast<double>(logits[static_cast<size_t>(tk.no_speech)]) - mx) / z);
        }
    }
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < max_new; ++i) {
        if (options.suppress_tokens)
            for (const int id : m.suppress_ids()) logits[static_cast<size_t>(id)] = neg_inf;
        if (options.suppress_blank && i == 0)
            for (const int id : m.suppress_ids_begin()) logits[static_cast<size_t>(id)] = neg_inf;
        if (timestamps)
            apply_timestamp_rules(logits, r.tokens, tk, options.max_initial_timestamp_index);
        const auto best = std::max_element(logits.begin(), logits.end());
        const int token = static_cast<int>(best - logits.begin());
        // log softmax of the chosen token over the (suppressed) logits.
        const double mx = *best;
        double sum = 0;
        for (const float v : logits) sum += std::exp(static_cast<double>(v) - mx);
        r.sum_logprob += -std::log(sum);
        if (token == eot) {
            r.reached_eot = true;
            break;
        }
        r.tokens.push_back(token);
        if (i + 1 < max_new) decoder.step(token, logits, pool);
    }
    return r;
}

}  // namespace sl::whisper
