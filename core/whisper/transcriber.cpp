#include "core/whisper/transcriber.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "core/util/error.h"
#include "core/whisper/beam_search.h"
#include "core/whisper/log_mel.h"
#include "core/whisper/sampling.h"
#include "core/whisper/whisper_decoder.h"

namespace sl::whisper {

namespace {

constexpr double kTimePerFrame = 0.01;   // seconds per mel frame (hop 160 at 16 kHz)
constexpr double kTimePrecision = 0.02;  // seconds per timestamp step
constexpr int kInputStride = 2;          // mel frames per encoder position

// faster-whisper's _split_segments_by_timestamps: the window's tokens cut into timed segments;
// advances `seek` (in mel frames) and tells whether the tokens end in a single timestamp.
std::vector<TimedSegment> split_by_timestamps(const std::vector<int>& tokens, int tb,
                                              double time_offset, int segment_size,
                                              double segment_duration, int& seek,
                                              bool& single_timestamp_ending) {
    std::vector<TimedSegment> out;
    const size_t n = tokens.size();
    single_timestamp_ending = n >= 2 && tokens[n - 2] < tb && tokens[n - 1] >= tb;
    std::vector<size_t> slices;
    for (size_t i = 1; i < n; ++i)
        if (tokens[i] >= tb && tokens[i - 1] >= tb) slices.push_back(i);
    if (!slices.empty()) {
        if (single_timestamp_ending) slices.push_back(n);
        size_t last = 0;
        for (const size_t cur : slices) {
            // cur > last: the cut points increase strictly and start above 0.
            TimedSegment s;
            s.start = time_offset + (tokens[last] - tb) * kTimePrecision;
            s.end = time_offset + (tokens[cur - 1] - tb) * kTimePrecision;
            s.tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(last),
                            tokens.begin() + static_cast<ptrdiff_t>(cur));
            out.push_back(std::move(s));
            last = cur;
        }
        if (single_timestamp_ending)
            seek += segment_size;
        else
            seek += (tokens[last - 1] - tb) * kInputStride;
    } else {
        double duration = segment_duration;
        int last_ts = -1;
        for (const int t : tokens)
            if (t >= tb) last_ts = t;
        if (last_ts >= 0 && last_ts != tb) duration = (last_ts - tb) * kTimePrecision;
        out.push_back(TimedSegment{time_offset, time_offset + duration, tokens, {}});
        seek += segment_size;
    }
    return out;
}

// The source followed by `pad` zero samples (faster-whisper pads 160 before its features).
class ZeroPadded final : public AudioSource {
public:
    ZeroPadded(AudioSource& inner, int64_t pad) : inner_(inner), pad_(pad) {}
    int64_t size() const override { return inner_.size() + pad_; }
    void read(int64_t begin, int64_t n, float* out) override {
        const int64_t inner_n = std::clamp<int64_t>(inner_.size() - begin, 0, n);
        if (inner_n > 0) inner_.read(begin, inner_n, out);
        std::fill(out + inner_n, out + n, 0.0f);
    }

private:
    AudioSource& inner_;
    int64_t pad_;
};

bool blank(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    });
}

struct Decoded {
    GreedyResult result;
    double avg_logprob = 0;
    float temperature = 0;
    double compression_ratio = 0;
};

// faster-whisper's generate_with_fallback: each temperature in turn until a result passes.
Decoded decode_with_fallback(WhisperDecoder& decoder, const WhisperTokenizer& tokenizer,
                             const std::vector<int>& prompt, const GreedyOptions& gopt,
                             const TranscribeOptions& options, std::mt19937_64& rng,
                             ThreadPool& pool, int& fallbacks) {
    std::vector<float> temperatures = options.temperatures;
    if (temperatures.empty()) temperatures.push_back(0.0f);
    std::vector<Decoded> all, below_cr;
    for (size_t i = 0; i < temperatures.size(); ++i) {
        const float t = temperatures[i];
        if (i > 0) ++fallbacks;
        Decoded d;
        d.temperature = t;
        d.result = t > 0.0f ? sample_decode(decoder, prompt, gopt, t, std::max(1, options.best_of),
                                            rng, pool)
                            : decode(decoder, prompt, gopt, pool);
        d.avg_logprob =
            d.result.sum_logprob / static_cast<double>(d.result.tokens.size() + 1);
        std::string text = tokenizer.decode_text(d.result.tokens);
        const size_t b = text.find_first_not_of(" \t\n\r\f\v");
        const size_t e = text.find_last_not_of(" \t\n\r\f\v");
        d.compression_ratio =
            b == std::string::npos ? 0.0 : compression_ratio(std::string_view(text).substr(b, e - b + 1));
        bool needs_fallback = false;
        if (options.compression_ratio_threshold > 0 &&
            d.compression_ratio > options.compression_ratio_threshold)
            needs_fallback = true;
        else
            below_cr.push_back(d);
        if (d.avg_logprob < options.log_prob_threshold) needs_fallback = true;
        // Silence: no fallback (the window is skipped).
        if (d.result.no_speech_prob > options.no_speech_threshold &&
            d.avg_logprob < options.log_prob_threshold)
            needs_fallback = false;
        if (!needs_fallback) return d;
        all.push_back(std::move(d));
    }
    const std::vector<Decoded>& pool_of = below_cr.empty() ? all : below_cr;
    Decoded best = *std::max_element(
        pool_of.begin(), pool_of.end(),
        [](const Decoded& a, const Decoded& b) { return a.avg_logprob < b.avg_logprob; });
    best.temperature = temperatures.back();  // as faster-whisper: the last temperature tried
    return best;
}

}  // namespace

Transcript transcribe(const WhisperModel& model, const WhisperTokenizer& tokenizer,
                      std::span<const float> audio, const TranscribeOptions& options,
                      ThreadPool& pool) {
    SpanAudioSource source(audio);
    return transcribe(model, tokenizer, source, options, pool);
}

Transcript transcribe(const WhisperModel& model, const WhisperTokenizer& tokenizer,
                      AudioSource& source, const TranscribeOptions& options, ThreadPool& pool) {
    const WhisperConfig& c = model.config();
    const WhisperTokens& tk = model.tokens();
    Transcript out;
    out.duration = static_cast<double>(source.size()) / kSampleRate;

    // faster-whisper's features: the audio + 160 zeros, the extra frame dropped. Pass 1 finds
    // the clamp's maximum; each window's frames are computed when it is decoded.
    ZeroPadded padded(source, kHopLength);
    const float max_log = log_mel_max(padded, c.n_mels);
    const int64_t content_frames = std::max<int64_t>(padded.size() / kHopLength - 1, 0);
    const int window_frames = 2 * c.n_audio_ctx;

    WhisperDecoder decoder(model);
    std::vector<int> all_tokens;
    size_t prompt_reset_since = 0;
    if (!options.initial_prompt.empty()) {
        const char* ws = " \t\n\r\f\v";
        const size_t b = options.initial_prompt.find_first_not_of(ws);
        if (b != std::string::npos) {
            const size_t e = options.initial_prompt.find_last_not_of(ws);
            std::string prompt(
                1, ' ');  // built by append: GCC 12's -Wrestrict misfires on " " + substr
            prompt.append(options.initial_prompt, b, e - b + 1);
            all_tokens = tokenizer.encode(prompt);
        }
    }
    LogMel window;
    window.n_mels = c.n_mels;
    window.n_frames = window_frames;
    std::vector<float> enc;
    GreedyOptions gopt;
    gopt.beam_size = options.beam_size;
    gopt.patience = options.patience;
    gopt.length_penalty = options.length_penalty;
    gopt.max_initial_timestamp_index =
        static_cast<int>(std::lround(options.max_initial_timestamp / kTimePrecision));

    std::mt19937_64 rng(options.seed);
    int lang_token = -1;               // multilingual models: the language's token, once known
    double last_speech_timestamp = 0;  // word timing: where the speech heard so far ended
    int seek = 0;
    while (seek < content_frames) {
        const double time_offset = seek * kTimePerFrame;
        const int segment_size =
            static_cast<int>(std::min<int64_t>(window_frames, content_frames - seek));
        const double segment_duration = segment_size * kTimePerFrame;
        const LogMel features = log_mel_window(padded, seek, segment_size, max_log, c.n_mels);
        window.data.assign(static_cast<size_t>(c.n_mels) * static_cast<size_t>(window_frames),
                           0.0f);
        for (int m = 0; m < c.n_mels; ++m)
            std::copy_n(features.data.begin() + static_cast<ptrdiff_t>(m) * segment_size,
                        segment_size,
                        window.data.begin() + static_cast<ptrdiff_t>(m) * window_frames);
        model.encode(window, enc, pool);
        decoder.set_audio(enc, pool);
        ++out.windows;

        if (c.multilingual() && lang_token < 0) {
            if (options.language.empty()) {
                const auto probs = detect_language(decoder, pool);
                lang_token = probs.front().first;
                out.language_probability = probs.front().second;
                const std::string& t = tokenizer.token_text(lang_token);  // "<|de|>"
                out.language = t.size() > 4 ? t.substr(2, t.size() - 4) : t;
            } else {
                lang_token = tokenizer.find("<|" + options.language + "|>");
                if (lang_token <= tk.sot || lang_token >= tk.translate)
                    throw Error("Whisper: the model knows no language '" + options.language + "'");
                out.language = options.language;
            }
        }

        std::vector<int> prompt;
        const size_t n_prev = all_tokens.size() - prompt_reset_since;
        if (n_prev > 0) {
            prompt.push_back(tk.sot_prev);
            const size_t keep = std::min<size_t>(n_prev, static_cast<size_t>(c.n_text_ctx / 2 - 1));
            prompt.insert(prompt.end(), all_tokens.end() - static_cast<ptrdiff_t>(keep),
                          all_tokens.end());
        }
        prompt.push_back(tk.sot);
        if (c.multilingual()) {
            prompt.push_back(lang_token);
            prompt.push_back(tk.transcribe);
        }
        if (!options.timestamps) prompt.push_back(tk.no_timestamps);

        const Decoded dec = decode_with_fallback(decoder, tokenizer, prompt, gopt, options, rng,
                                                 pool, out.fallbacks);
        const GreedyResult& r = dec.result;
        const double avg_logprob = dec.avg_logprob;
        const bool skip = r.no_speech_prob > options.no_speech_threshold &&
                          !(avg_logprob > options.log_prob_threshold);
        if (skip) {
            seek += segment_size;
        } else {
            const int window_seek = seek;
            bool single_ending = false;
            std::vector<TimedSegment> cut =
                split_by_timestamps(r.tokens, tk.timestamp_begin, time_offset, segment_size,
                                    segment_duration, seek, single_ending);
            if (options.word_timestamps) {
                std::vector<int> sot_sequence{tk.sot};
                if (c.multilingual()) sot_sequence = {tk.sot, lang_token, tk.transcribe};
                add_word_timestamps(cut, decoder, tokenizer, sot_sequence, window_seek,
                                    segment_size, last_speech_timestamp, pool);
                // faster-whisper's get_end: the last word's end, else the last segment's.
                std::optional<double> last_end;
                for (auto it = cut.rbegin(); it != cut.rend() && !last_end; ++it)
                    if (!it->words.empty()) last_end = it->words.back().end;
                if (!last_end && !cut.empty()) last_end = cut.back().end;
                if (!single_ending && last_end && *last_end > time_offset)
                    seek = static_cast<int>(std::nearbyint(*last_end * 100.0));
                if (last_end) last_speech_timestamp = *last_end;
            }
            for (TimedSegment& s : cut) {
                std::string text = tokenizer.decode_text(s.tokens);
                if (s.start == s.end || blank(text)) continue;
                all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
                out.segments.push_back(TranscriptSegment{
                    s.start, s.end, std::move(text), std::move(s.tokens), avg_logprob,
                    r.no_speech_prob, dec.temperature, dec.compression_ratio, std::move(s.words)});
            }
            if (!options.condition_on_previous_text ||
                dec.temperature > options.prompt_reset_on_temperature)
                prompt_reset_since = all_tokens.size();
        }
        if (options.progress &&
            !options.progress(
                std::min<double>(seek, static_cast<double>(content_frames)) * kTimePerFrame,
                out.duration)) {
            out.canceled = true;
            break;
        }
    }
    return out;
}

}  // namespace sl::whisper
