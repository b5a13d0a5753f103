#include "core/whisper/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/util/error.h"

namespace sl::whisper {

namespace {

// In place: row <- log_softmax(row).
void log_softmax(std::span<float> row) {
    const float mx = *std::max_element(row.begin(), row.end());
    if (!std::isfinite(mx)) return;
    double z = 0;
    for (const float v : row) z += std::exp(static_cast<double>(v) - mx);
    const auto log_z = static_cast<float>(mx + std::log(z));
    for (float& v : row) v -= log_z;
}

struct Hypothesis {
    std::vector<int> tokens;
    double score = 0;  // cumulative log-probability
    bool eos = false;  // ended with <|endoftext|> (not cut at the last step)
};

}  // namespace

GreedyResult beam_search(WhisperDecoder& decoder, std::span<const int> prompt,
                         const GreedyOptions& options, ThreadPool& pool) {
    if (prompt.empty()) throw Error("Whisper beam search: empty prompt");
    if (options.beam_size < 2) throw Error("Whisper beam search: beam_size must be at least 2");
    const WhisperModel& m = decoder.model();
    const WhisperTokens& tk = m.tokens();
    const int K = options.beam_size, C = 2 * K;
    const auto V = static_cast<int64_t>(m.config().n_vocab);
    const size_t max_hypotheses =
        static_cast<size_t>(std::lround(static_cast<float>(K) * options.patience));
    const bool timestamps = prompt.back() != tk.no_timestamps;
    // Never past the model's text context (448 for every Whisper; smaller in tests).
    const int max_length = std::min(options.max_length, m.config().n_text_ctx);
    const int start_step = static_cast<int>(prompt.size()) - 1;
    const int max_steps = std::min(max_length / 2, max_length - start_step);
    const bool early_exit = options.length_penalty == 0;

    GreedyResult r;
    std::vector<float> logits;
    feed_prompt(decoder, prompt, logits, r.no_speech_prob, pool);

    std::vector<std::vector<int>> alive(1);  // the beams' generated tokens
    std::vector<double> alive_scores{0.0};
    std::vector<int> beam_tokens;  // the tokens to feed the beams next
    std::vector<Hypothesis> finished;
    bool top_finished = false;
    std::vector<int64_t> order;
    std::vector<float> flat;
    for (int step = 0; step < max_steps; ++step) {
        const int n_rows = static_cast<int>(alive.size());
        if (step > 0) decoder.step_beams(beam_tokens, logits, pool);
        // Rules, log-softmax and the beam's score, per row.
        flat.resize(static_cast<size_t>(n_rows * V));
        for (int b = 0; b < n_rows; ++b) {
            std::span<float> row(logits.data() + b * V, static_cast<size_t>(V));
            apply_logit_rules(row, alive[static_cast<size_t>(b)], timestamps, options, m);
            log_softmax(row);
            for (int64_t j = 0; j < V; ++j)
                flat[static_cast<size_t>(b * V + j)] = static_cast<float>(
                    row[static_cast<size_t>(j)] + alive_scores[static_cast<size_t>(b)]);
        }
        // The best C candidates over all rows.
        order.resize(flat.size());
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + C, order.end(), [&](int64_t a, int64_t b) {
            const float fa = flat[static_cast<size_t>(a)], fb = flat[static_cast<size_t>(b)];
            return fa > fb || (fa == fb && a < b);
        });
        std::vector<std::vector<int>> cand(static_cast<size_t>(C));
        std::vector<double> cand_score(static_cast<size_t>(C));
        std::vector<int> cand_word(static_cast<size_t>(C)), cand_origin(static_cast<size_t>(C));
        for (int j = 0; j < C; ++j) {
            const int64_t f = order[static_cast<size_t>(j)];
            cand_origin[static_cast<size_t>(j)] = static_cast<int>(f / V);
            cand_word[static_cast<size_t>(j)] = static_cast<int>(f % V);
            cand_score[static_cast<size_t>(j)] = flat[static_cast<size_t>(f)];
            cand[static_cast<size_t>(j)] =
                alive[static_cast<size_t>(cand_origin[static_cast<size_t>(j)])];
            cand[static_cast<size_t>(j)].push_back(cand_word[static_cast<size_t>(j)]);
        }
        // Finished hypotheses among the first K; refill their beams from the secondary ones.
        const bool last_step = step + 1 == max_steps;
        std::vector<int> active(static_cast<size_t>(K));
        int secondary = K;
        for (int k = 0; k < K; ++k) {
            int next = k;
            const bool eos = cand_word[static_cast<size_t>(k)] == tk.eot;
            if (eos || last_step) {
                if (k == 0) top_finished = true;
                Hypothesis h;
                h.tokens = cand[static_cast<size_t>(k)];
                if (eos) h.tokens.pop_back();
                h.eos = eos;
                h.score = cand_score[static_cast<size_t>(k)];
                finished.push_back(std::move(h));
                for (int j = secondary; j < C; ++j) {
                    if (cand_word[static_cast<size_t>(j)] != tk.eot) {
                        next = j;
                        secondary = j + 1;
                        break;
                    }
                }
            }
            active[static_cast<size_t>(k)] = next;
        }
        const bool done = last_step || (early_exit ? top_finished && !finished.empty()
                                                   : finished.size() >= max_hypotheses);
        if (done) break;
        // The surviving beams.
        std::vector<std::vector<int>> next_alive(static_cast<size_t>(K));
        std::vector<double> next_scores(static_cast<size_t>(K));
        std::vector<int> origins(static_cast<size_t>(K));
        beam_tokens.assign(static_cast<size_t>(K), 0);
        for (int k = 0; k < K; ++k) {
            const auto j = static_cast<size_t>(active[static_cast<size_t>(k)]);
            next_alive[static_cast<size_t>(k)] = std::move(cand[j]);
            next_scores[static_cast<size_t>(k)] = cand_score[j];
            origins[static_cast<size_t>(k)] = cand_origin[j];
            beam_tokens[static_cast<size_t>(k)] = cand_word[j];
        }
        if (decoder.beams() != K)
            decoder.set_beams(K);  // the first step: copies of the prompt
        else
            decoder.reorder_beams(origins);
        alive = std::move(next_alive);
        alive_scores = std::move(next_scores);
    }
    if (finished.empty()) return r;
    // Rank by length-normalized score; the first best wins ties (a stable order).
    size_t best = 0;
    double best_norm = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < finished.size(); ++i) {
        const double len = static_cast<double>(finished[i].tokens.size());
        const double norm = finished[i].score / std::pow(len, options.length_penalty);
        if (norm > best_norm) best_norm = norm, best = i;
    }
    r.tokens = std::move(finished[best].tokens);
    r.sum_logprob = finished[best].score;
    r.reached_eot = finished[best].eos;
    return r;
}

GreedyResult decode(WhisperDecoder& decoder, std::span<const int> prompt,
                    const GreedyOptions& options, ThreadPool& pool) {
    return options.beam_size > 1 ? beam_search(decoder, prompt, options, pool)
                                 : greedy_decode(decoder, prompt, options, pool);
}

}  // namespace sl::whisper
