#include "core/whisper/sampling.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/util/error.h"

namespace sl::whisper {

GreedyResult sample_decode(WhisperDecoder& decoder, std::span<const int> prompt,
                           const GreedyOptions& options, float temperature, int best_of,
                           std::mt19937_64& rng, ThreadPool& pool) {
    if (prompt.empty()) throw Error("Whisper sampling: empty prompt");
    if (!(temperature > 0.0f) || best_of < 1)
        throw Error("Whisper sampling: the temperature must be above 0 and best_of at least 1");
    const WhisperModel& m = decoder.model();
    const int eot = m.tokens().eot;
    const bool timestamps = prompt.back() != m.tokens().no_timestamps;
    const int max_length = std::min(options.max_length, m.config().n_text_ctx);
    const int start_step = static_cast<int>(prompt.size()) - 1;
    const int max_new = std::min(max_length / 2, max_length - start_step);
    const auto V = static_cast<size_t>(m.config().n_vocab);

    GreedyResult r;
    std::vector<float> logits;
    feed_prompt(decoder, prompt, logits, r.no_speech_prob, pool);
    const auto n = static_cast<size_t>(best_of);
    std::vector<std::vector<int>> gen(n);
    std::vector<double> score(n, 0.0);
    std::vector<char> done(n, 0), eos(n, 0);
    std::vector<float> row(V);
    std::vector<double> cum(V);
    std::vector<int> feed(n, eot);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int step = 0; step < max_new; ++step) {
        for (size_t b = 0; b < n; ++b) {
            if (done[b]) continue;
            // Before the first step every hypothesis shares the prompt's logits.
            const float* src = logits.data() + (step == 0 ? 0 : b * V);
            std::copy_n(src, V, row.begin());
            apply_logit_rules(row, gen[b], timestamps, options, m);
            const float mx = *std::max_element(row.begin(), row.end());
            double z = 0.0, zt = 0.0;
            for (size_t j = 0; j < V; ++j) {
                const double d = static_cast<double>(row[j]) - mx;
                z += std::exp(d);
                zt += std::exp(d / temperature);
                cum[j] = zt;
            }
            const double u = uniform(rng) * zt;
            auto it = std::upper_bound(cum.begin(), cum.end(), u);
            if (it == cum.end()) it = std::max_element(row.begin(), row.end()) - row.begin() + cum.begin();
            // A draw never lands on a suppressed (-inf) token: its cumulative sum does not grow.
            while (it != cum.begin() && !std::isfinite(row[static_cast<size_t>(it - cum.begin())]))
                --it;
            const int token = static_cast<int>(it - cum.begin());
            score[b] += static_cast<double>(row[static_cast<size_t>(token)]) - mx - std::log(z);
            if (token == eot) {
                done[b] = eos[b] = 1;
            } else {
                gen[b].push_back(token);
            }
            feed[b] = token;
        }
        if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; }) ||
            step + 1 == max_new)
            break;
        if (step == 0) decoder.set_beams(best_of);
        decoder.step_beams(feed, logits, pool);
    }
    size_t best = 0;
    double best_norm = -std::numeric_limits<double>::infinity();
    for (size_t b = 0; b < n; ++b) {
        const double len = std::max<double>(1.0, static_cast<double>(gen[b].size()));
        const double norm = score[b] / std::pow(len, options.length_penalty);
        if (norm > best_norm) best_norm = norm, best = b;
    }
    r.tokens = std::move(gen[best]);
    r.sum_logprob = score[best];
    r.reached_eot = eos[best] != 0;
    return r;
}

double compression_ratio(std::string_view text) {
    if (text.empty()) return 0.0;
    uLongf out_len = compressBound(static_cast<uLong>(text.size()));
    std::vector<Bytef> out(out_len);
    if (compress2(out.data(), &out_len, reinterpret_cast<const Bytef*>(text.data()),
                  static_cast<uLong>(text.size()), 6) != Z_OK || out_len == 0)
        return 0.0;
    return static_cast<double>(text.size()) / static_cast<double>(out_len);
}

}  // namespace sl::whisper
