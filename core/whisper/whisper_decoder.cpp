#include "core/whisper/whisper_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/gemm_s8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace sl::whisper {

namespace {

// One query against n keys for one head: out (hd) = softmax(q k_j) v_j (q already scaled by
// 1 / sqrt(hd) in the query weights), key j at k + j * stride, value j at v + j * stride;
// `scores` holds n floats of scratch.
void attend_head(const float* q, const float* k, const float* v, int64_t stride, int64_t n,
                 int64_t hd, float* out, float* scores) {
    kernels::dot_rows_f32(scores, q, k, stride, n, hd, 1.0f);
    kernels::softmax(scores, n);
    std::fill_n(out, hd, 0.0f);
    kernels::accumulate_rows_f32(out, scores, v, stride, n, hd);
}

}  // namespace

WhisperDecoder::WhisperDecoder(const WhisperModel& model) : model_(model) {
    const WhisperConfig& c = model.config();
    const auto d = static_cast<size_t>(c.d_model);
    const auto layers = static_cast<size_t>(c.n_text_layers);
    cross_kv_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_audio_ctx) * 2 * d));
    self_k_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_text_ctx) * d));
    self_v_.assign(layers, std::vector<float>(static_cast<size_t>(c.n_text_ctx) * d));
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
    const int row = 0;
    feed(std::span<const int>(&token, 1), std::span<const int>(&row, 1), logits, pool);
}

void WhisperDecoder::feed(std::span<const int> tokens, std::span<const int> logit_rows,
                          std::vector<float>& logits, ThreadPool& pool) {
    if (n_seq_ != 1) throw Error("Whisper decoder: feed() while holding several beams");
    forward(tokens, logit_rows, logits, pool, false);
}

void WhisperDecoder::set_beams(int n) {
    if (n < 1) throw Error("Whisper decoder: " + std::to_string(n) + " beams");
    const WhisperConfig& c = model_.config();
    const auto seq = static_cast<size_t>(c.n_text_ctx) * static_cast<size_t>(c.d_model);
    const auto used = static_cast<size_t>(pos_) * static_cast<size_t>(c.d_model);
    for (auto* cache : {&self_k_, &self_v_}) {
        for (auto& layer : *cache) {
            layer.resize(static_cast<size_t>(n) * seq);
            for (int b = 1; b < n; ++b)
                std::copy_n(layer.begin(), used, layer.begin() + static_cast<ptrdiff_t>(b * seq));
        }
    }
    n_seq_ = n;
}

void WhisperDecoder::reorder_beams(std::span<const int> origins) {
    const WhisperConfig& c = model_.config();
    if (static_cast<int>(origins.size()) != n_seq_)
        throw Error("Whisper decoder: reorder of " + std::to_string(origins.size()) +
                    " beams, holding " + std::to_string(n_seq_));
    for (const int o : origins)
        if (o < 0 || o >= n_seq_) throw Error("Whisper decoder: beam origin out of range");
    bool identity = true;
    for (int b = 0; b < n_seq_; ++b) identity = identity && origins[static_cast<size_t>(b)] == b;
    if (identity) return;
    // Only the positions fed so far are copied, through a scratch of the source beams.
    const auto seq = static_cast<size_t>(c.n_text_ctx) * static_cast<size_t>(c.d_model);
    const auto used = static_cast<size_t>(pos_) * static_cast<size_t>(c.d_model);
    std::vector<float> old(used * static_cast<size_t>(n_seq_));
    for (auto* cache : {&self_k_, &self_v_}) {
        for (auto& layer : *cache) {
            for (int b = 0; b < n_seq_; ++b)
                std::copy_n(layer.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b) * seq),
                            used,
                            old.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b) * used));
            for (int b = 0; b < n_seq_; ++b) {
                const auto o = static_cast<size_t>(origins[static_cast<size_t>(b)]);
                if (o == static_cast<size_t>(b)) continue;
                std::copy_n(old.begin() + static_cast<ptrdiff_t>(o * used), used,
                            layer.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b) * seq));
            }
        }
    }
}

void WhisperDecoder::step_beams(std::span<const int> tokens, std::vector<float>& logits,
                                ThreadPool& pool) {
    if (static_cast<int>(tokens.size()) != n_seq_)
        throw Error("Whisper decoder: " + std::to_string(tokens.size()) + " tokens for " +
                    std::to_string(n_seq_) + " beams");
    std::vector<int> rows(tokens.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
    forward(tokens, rows, logits, pool, true);
}

void WhisperDecoder::forward(std::span<const int> tokens, std::span<const int> logit_rows,
                             std::vector<float>& logits, ThreadPool& pool, bool beams) {
    const WhisperConfig& c = model_.config();
    if (!have_audio_) throw Error("Whisper decoder: step() before set_audio()");
    const auto T = static_cast<int64_t>(tokens.size());
    for (const int t : tokens)
        if (t < 0 || t >= c.n_vocab)
            throw Error("Whisper decoder: token " + std::to_string(t) +
                        " is outside the vocabulary");
    for (const int r : logit_rows)
        if (r < 0 || r >= T)
            throw Error("Whisper decoder: logit row " + std::to_string(r) + " out of range");
    if (pos_ + (beams ? 1 : T) > c.n_text_ctx)
        throw Error("Whisper decoder: the text context of " + std::to_string(c.n_text_ctx) +
                    " tokens is full");
    if (T == 0) {
        logits.clear();
        return;
    }
    const int64_t d = c.d_model;
    const int H = c.n_text_heads;
    const int64_t hd = d / H;
    const auto td = static_cast<size_t>(T * d);
    x_.resize(td);
    h_.resize(td);
    qkv_.resize(3 * td);
    ctx_.resize(td);
    tmp_.resize(td);
    ffn_.resize(static_cast<size_t>(T) * static_cast<size_t>(c.n_ffn));
    const float* emb = model_.token_embedding().data();
    const float* pos = model_.text_positions().data();
    float* x = x_.data();
    // Token i: sequence seq(i), position at(i). One sequence: consecutive positions; beams: one
    // token per beam, all at the same position.
    const int64_t p0 = pos_;
    const int64_t seq_stride = static_cast<int64_t>(c.n_text_ctx) * d;
    auto seq = [&](int64_t i) { return beams ? i : int64_t{0}; };
    auto at = [&](int64_t i) { return beams ? p0 : p0 + i; };
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < d; ++j)
            x[i * d + j] = emb[tokens[static_cast<size_t>(i)] * d + j] + pos[at(i) * d + j];

    const auto& layers = model_.decoder_layers();
    if (capture_)
        captured_.assign(model_.alignment_heads().size() * static_cast<size_t>(T) *
                             static_cast<size_t>(c.n_audio_ctx),
                         0.0f);
    for (size_t L = 0; L < layers.size(); ++L) {
        const DecoderLayer& l = layers[L];
        float* K = self_k_[L].data();
        float* V = self_v_[L].data();
        // Causal self-attention: the batch's K and V go into the cache first; token i sees
        // positions 0..at(i) of its sequence.
        std::copy_n(x, td, h_.data());
        WhisperModel::layer_norm(h_.data(), T, d, l.ln_self, pool);
        WhisperModel::apply(l.self_qkv, h_.data(), T, qkv_.data(), pool);
        for (int64_t i = 0; i < T; ++i) {
            std::copy_n(qkv_.data() + i * 3 * d + d, d, K + seq(i) * seq_stride + at(i) * d);
            std::copy_n(qkv_.data() + i * 3 * d + 2 * d, d, V + seq(i) * seq_stride + at(i) * d);
        }
        pool.parallel_for(T * H, [&](int64_t w0, int64_t w1, int) {
            std::vector<float> scores(static_cast<size_t>(p0 + T));
            for (int64_t w = w0; w < w1; ++w) {
                const int64_t i = w / H, h = w % H;
                attend_head(qkv_.data() + i * 3 * d + h * hd, K + seq(i) * seq_stride + h * hd,
                            V + seq(i) * seq_stride + h * hd, d, at(i) + 1, hd,
                            ctx_.data() + i * d + h * hd, scores.data());
            }
        });
        WhisperModel::apply(l.self_out, ctx_.data(), T, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), T * d);

        // Cross-attention over the encoder output.
        std::copy_n(x, td, h_.data());
        WhisperModel::layer_norm(h_.data(), T, d, l.ln_cross, pool);
        WhisperModel::apply(l.cross_q, h_.data(), T, qkv_.data(), pool);  // (T, d)
        const float* kv = cross_kv_[L].data();
        // Alignment capture: this layer's heads that are alignment heads, and their slots.
        std::vector<int> slot(static_cast<size_t>(H), -1);
        if (capture_) {
            const auto& heads = model_.alignment_heads();
            for (size_t a = 0; a < heads.size(); ++a)
                if (heads[a].first == static_cast<int>(L))
                    slot[static_cast<size_t>(heads[a].second)] = static_cast<int>(a);
        }
        pool.parallel_for(T * H, [&](int64_t w0, int64_t w1, int) {
            std::vector<float> scores(static_cast<size_t>(c.n_audio_ctx));
            for (int64_t w = w0; w < w1; ++w) {
                const int64_t i = w / H, h = w % H;
                const float* q = qkv_.data() + i * d + h * hd;
                if (slot[static_cast<size_t>(h)] >= 0) {
                    float* keep =
                        captured_.data() + (slot[static_cast<size_t>(h)] * T + i) * c.n_audio_ctx;
                    kernels::dot_rows_f32(keep, q, kv + h * hd, 2 * d, c.n_audio_ctx, hd, 1.0f);
                }
                attend_head(q, kv + h * hd, kv + d + h * hd, 2 * d, c.n_audio_ctx, hd,
                            ctx_.data() + i * d + h * hd, scores.data());
            }
        });
        WhisperModel::apply(l.cross_out, ctx_.data(), T, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), T * d);

        // Feed-forward.
        std::copy_n(x, td, h_.data());
        WhisperModel::layer_norm(h_.data(), T, d, l.ln_ffn, pool);
        WhisperModel::apply(l.up, h_.data(), T, ffn_.data(), pool);
        kernels::gelu_erf(ffn_.data(), T * c.n_ffn);
        WhisperModel::apply(l.down, ffn_.data(), T, tmp_.data(), pool);
        kernels::add(x, tmp_.data(), T * d);
    }
    pos_ += beams ? 1 : static_cast<int>(T);

    // Tied output projection for the requested rows: logits[r][j] = emb[j] . LN(x[row r]).
    const auto V = static_cast<size_t>(c.n_vocab);
    const auto R = static_cast<int64_t>(logit_rows.size());
    logits.resize(static_cast<size_t>(R) * V);
    if (R == 0) return;
    float* hn = h_.data();  // (R, d): the normalized rows
    for (int64_t r = 0; r < R; ++r)
        std::copy_n(x + logit_rows[static_cast<size_t>(r)] * d, d, hn + r * d);
    WhisperModel::layer_norm(hn, R, d, model_.decoder_norm(), pool);
    if (!model_.token_embedding_s8().empty()) {
        // int8 rows: every requested row at once, the vocabulary split across the pool in panels.
        const kernels::S8Weights& w = model_.token_embedding_s8();
        std::vector<uint8_t> hq(static_cast<size_t>(kernels::s8_row_bytes(d) * R));
        std::vector<float> hs(static_cast<size_t>(R));
        kernels::quantize_tokens(hn, d, R, d, hq.data(), hs.data());
        pool.parallel_for(
            c.n_vocab,
            [&](int64_t c0, int64_t c1, int) {
                kernels::gemm_s8(hq.data(), hs.data(), R, w, nullptr, logits.data(), c.n_vocab, c0,
                                 c1);
            },
            kernels::kS8Panel);
        return;
    }
    if (!model_.token_embedding_q8().empty()) {
        // Q8_0: all rows at once, vocabulary rows spread over the pool.
        const size_t row_bytes = kernels::activation_row_bytes(kernels::TensorType::Q8_0, d);
        std::vector<uint8_t> hq(row_bytes * static_cast<size_t>(R));
        kernels::quantize_activations(kernels::TensorType::Q8_0, hn, R, d, hq.data());
        const uint8_t* wq = model_.token_embedding_q8().data();
        pool.parallel_for(
            c.n_vocab,
            [&](int64_t r0, int64_t r1, int) {
                kernels::matmul_rows(kernels::TensorType::Q8_0, wq, d, hq.data(), R, logits.data(),
                                     c.n_vocab, r0, r1);
            },
            64);
        return;
    }
    if (R <= 16) {
        // A few rows (decoding steps, beams): dot products over blocks of the vocabulary small
        // enough to stay in cache while every row passes over them, so the embedding is read
        // from memory once.
        constexpr int64_t kBlock = 256;
        pool.parallel_for(
            c.n_vocab,
            [&](int64_t r0, int64_t r1, int) {
                for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
                    const int64_t nb = std::min(kBlock, r1 - b0);
                    for (int64_t r = 0; r < R; ++r)
                        kernels::dot_rows_f32(logits.data() + static_cast<size_t>(r) * V + b0,
                                              hn + r * d, emb + b0 * d, d, nb, d, 1.0f);
                }
            },
            64);
        return;
    }
    // Many rows (word alignment): one GEMM with the roles swapped, the embedding streamed once:
    // Y (n_vocab, R) = emb (n_vocab, d) . LN(x)^T, the rows packed as the weight.
    std::vector<float> hp(kernels::packed_size(R, d)), y(V * static_cast<size_t>(R));
    kernels::pack_panels(hn, R, d, hp.data());
    pool.parallel_for(
        c.n_vocab,
        [&](int64_t r0, int64_t r1, int) {
            kernels::gemm_f32(emb + r0 * d, d, r1 - r0, d, hp.data(), R, nullptr, y.data() + r0 * R,
                              R, 0, R);
        },
        kernels::kGemmTokenBlock);
    for (size_t j = 0; j < V; ++j)
        for (int64_t r = 0; r < R; ++r)
            logits[static_cast<size_t>(r) * V + j] =
                y[j * static_cast<size_t>(R) + static_cast<size_t>(r)];
}

namespace {

// CTranslate2's ApplyTimestampRules for the step after `generated` (the tokens sampled so far):
// sets disallowed logits to -inf. Runs after the suppression lists.
void apply_timestamp_rules(std::span<float> logits, std::span<const int> generated,
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

void apply_logit_rules(std::span<float> logits, std::span<const int> generated, bool timestamps,
                       const GreedyOptions& options, const WhisperModel& model) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    if (options.suppress_tokens)
        for (const int id : model.suppress_ids()) logits[static_cast<size_t>(id)] = neg_inf;
    if (options.suppress_blank && generated.empty())
        for (const int id : model.suppress_ids_begin()) logits[static_cast<size_t>(id)] = neg_inf;
    if (timestamps)
        apply_timestamp_rules(logits, generated, model.tokens(),
                              options.max_initial_timestamp_index);
}

void feed_prompt(WhisperDecoder& decoder, std::span<const int> prompt, std::vector<float>& logits,
                 float& no_speech_prob, ThreadPool& pool) {
    const WhisperTokens& tk = decoder.model().tokens();
    decoder.reset();
    // Logits after the last token, and after <|startoftranscript|> for the no-speech probability
    // (from the raw logits, as CTranslate2 computes it).
    const auto sot_it = std::find(prompt.begin(), prompt.end(), tk.sot);
    const int last_row = static_cast<int>(prompt.size()) - 1;
    std::vector<int> rows{last_row};
    if (sot_it != prompt.end() && sot_it - prompt.begin() != last_row)
        rows.push_back(static_cast<int>(sot_it - prompt.begin()));
    decoder.feed(prompt, rows, logits, pool);
    const auto n_vocab = static_cast<size_t>(decoder.model().config().n_vocab);
    no_speech_prob = 0;
    if (sot_it != prompt.end()) {
        const float* sl = logits.data() + (rows.size() == 2 ? n_vocab : 0);
        const float mx = *std::max_element(sl, sl + n_vocab);
        double z = 0;
        for (size_t j = 0; j < n_vocab; ++j) z += std::exp(static_cast<double>(sl[j]) - mx);
        no_speech_prob = static_cast<float>(
            std::exp(static_cast<double>(sl[static_cast<size_t>(tk.no_speech)]) - mx) / z);
    }
    logits.resize(n_vocab);  // the last token's row
}

GreedyResult greedy_decode(WhisperDecoder& decoder, std::span<const int> prompt,
                           const GreedyOptions& options, ThreadPool& pool) {
    if (prompt.empty()) throw Error("Whisper greedy decoding: empty prompt");
    const WhisperModel& m = decoder.model();
    const WhisperTokens& tk = m.tokens();
    const int eot = tk.eot;
    const bool timestamps = prompt.back() != tk.no_timestamps;
    // Never past the model's text context (448 for every Whisper; smaller in tests).
    const int max_length = std::min(options.max_length, m.config().n_text_ctx);
    const int start_step = static_cast<int>(prompt.size()) - 1;
    const int max_new = std::min(max_length / 2, max_length - start_step);

    GreedyResult r;
    std::vector<float> logits;
    feed_prompt(decoder, prompt, logits, r.no_speech_prob, pool);
    for (int i = 0; i < max_new; ++i) {
        apply_logit_rules(logits, r.tokens, timestamps, options, m);
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

std::vector<std::pair<int, float>> detect_language(WhisperDecoder& decoder, ThreadPool& pool) {
    const WhisperModel& m = decoder.model();
    const std::vector<int>& langs = m.lang_ids();
    if (langs.empty()) throw Error("Whisper: language detection needs a multilingual model");
    std::vector<float> logits;
    decoder.reset();
    decoder.step(m.tokens().sot, logits, pool);
    decoder.reset();
    float mx = -std::numeric_limits<float>::infinity();
    for (const int id : langs) mx = std::max(mx, logits[static_cast<size_t>(id)]);
    double z = 0;
    for (const int id : langs)
        z += std::exp(static_cast<double>(logits[static_cast<size_t>(id)]) - mx);
    std::vector<std::pair<int, float>> out;
    out.reserve(langs.size());
    for (const int id : langs)
        out.emplace_back(
            id, static_cast<float>(
                    std::exp(static_cast<double>(logits[static_cast<size_t>(id)]) - mx) / z));
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
}

}  // namespace sl::whisper
