#include "core/whisper/word_timing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"

namespace sl::whisper {

namespace {

constexpr double kTokensPerSecond = 50.0;  // audio positions per second
constexpr double kFramesPerSecond = 100.0;
// faster-whisper's defaults.
constexpr const char* kPrepend = "\"'\xe2\x80\x9c\xc2\xbf([{-";
constexpr const char* kAppend =
    "\"'.\xe3\x80\x82,\xef\xbc\x8c!\xef\xbc\x81?\xef\xbc\x9f:\xef\xbc\x9a\xe2\x80\x9d)]}"
    "\xe3\x80\x81";
constexpr const char* kSentenceEnd = ".\xe3\x80\x82!\xef\xbc\x81?\xef\xbc\x9f";
constexpr const char* kAsciiPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

// Python's `a in b` for strings: a substring test (the empty string is in every string).
bool in(const std::string& a, const char* b) {
    return std::string_view(b).find(a) != std::string_view::npos;
}

std::string strip(const std::string& s) {
    const char* ws = " \t\n\r\f\v";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Whether `s` is whole, valid UTF-8 (no truncated or stray bytes).
bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80         ? 1
                         : (c >> 5) == 6  ? 2
                         : (c >> 4) == 14 ? 3
                         : (c >> 3) == 30 ? 4
                                          : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
        i += n;
    }
    return true;
}

// Python's round(x, 2) for the values seen here (ties to even on the binary value).
double round2(double x) {
    return std::nearbyint(x * 100.0) / 100.0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// CTranslate2's negative_dtw: the monotonic path through x (n, m) of least total -x, as
// (row, column) pairs from the start; the backtrace stops when it reaches row or column 0.
std::vector<std::pair<int, int>> negative_dtw(const std::vector<float>& x, int n, int m) {
    if (n <= 0 || m <= 0) return {};
    const auto W = static_cast<size_t>(m + 1);
    std::vector<float> cost(static_cast<size_t>(n + 1) * W, std::numeric_limits<float>::infinity());
    std::vector<int8_t> trace(static_cast<size_t>(n + 1) * W, -1);
    cost[0] = 0;
    for (int j = 1; j <= m; ++j) {
        for (int i = 1; i <= n; ++i) {
            const float c0 = cost[static_cast<size_t>(i - 1) * W + static_cast<size_t>(j - 1)];
            const float c1 = cost[static_cast<size_t>(i - 1) * W + static_cast<size_t>(j)];
            const float c2 = cost[static_cast<size_t>(i) * W + static_cast<size_t>(j - 1)];
            float c;
            int8_t t;
            if (c0 < c1 && c0 < c2)
                c = c0, t = 0;
            else if (c1 < c0 && c1 < c2)
                c = c1, t = 1;
            else
                c = c2, t = 2;
            cost[static_cast<size_t>(i) * W + static_cast<size_t>(j)] =
                -x[static_cast<size_t>(i - 1) * static_cast<size_t>(m) +
                   static_cast<size_t>(j - 1)] +
                c;
            trace[static_cast<size_t>(i) * W + static_cast<size_t>(j)] = t;
        }
    }
    for (int j = 0; j <= m; ++j) trace[static_cast<size_t>(j)] = 2;
    for (int i = 0; i <= n; ++i) trace[static_cast<size_t>(i) * W] = 1;
    std::vector<std::pair<int, int>> path;
    int i = n, j = m;
    while (i > 0 && j > 0) {
        path.emplace_back(i - 1, j - 1);
        const int8_t t = trace[static_cast<size_t>(i) * W + static_cast<size_t>(j)];
        if (t == 0)
            --i, --j;
        else if (t == 1)
            --i;
        else
            --j;
    }
    std::reverse(path.begin(), path.end());
    return path;
}

// faster-whisper's split_to_word_tokens (languages written with spaces).
void split_words(const WhisperTokenizer& tok, std::span<const int> tokens, int eot,
                 std::vector<std::string>& words, std::vector<std::vector<int>>& word_tokens) {
    // Pieces that decode to whole characters.
    std::vector<std::string> sub;
    std::vector<std::vector<int>> sub_tokens;
    std::vector<int> cur;
    std::string bytes;
    for (const int t : tokens) {
        cur.push_back(t);
        bytes += t >= eot ? tok.token_text(t) : tok.decode_text(std::span<const int>(&t, 1));
        if (valid_utf8(bytes)) {
            sub.push_back(bytes);
            sub_tokens.push_back(cur);
            cur.clear();
            bytes.clear();
        }
    }
    if (!cur.empty()) {
        sub.push_back(bytes);
        sub_tokens.push_back(cur);
    }
    for (size_t i = 0; i < sub.size(); ++i) {
        const bool special = sub_tokens[i][0] >= eot;
        const bool with_space = !sub[i].empty() && sub[i][0] == ' ';
        const bool punctuation = in(strip(sub[i]), kAsciiPunctuation);
        if (special || with_space || punctuation || words.empty()) {
            words.push_back(sub[i]);
            word_tokens.push_back(sub_tokens[i]);
        } else {
            words.back() += sub[i];
            word_tokens.back().insert(word_tokens.back().end(), sub_tokens[i].begin(),
                                      sub_tokens[i].end());
        }
    }
}

void merge_punctuations(std::vector<WordTiming>& a) {
    if (a.size() < 2) return;
    // Prepended marks join the word after them.
    for (ptrdiff_t i = static_cast<ptrdiff_t>(a.size()) - 2, j = i + 1; i >= 0; --i) {
        WordTiming& prev = a[static_cast<size_t>(i)];
        WordTiming& next = a[static_cast<size_t>(j)];
        if (!prev.word.empty() && prev.word[0] == ' ' && in(strip(prev.word), kPrepend)) {
            next.word = prev.word + next.word;
            next.tokens.insert(next.tokens.begin(), prev.tokens.begin(), prev.tokens.end());
            prev.word.clear();
            prev.tokens.clear();
        } else {
            j = i;
        }
    }
    // Appended marks join the word before them.
    for (size_t i = 0, j = 1; j < a.size(); ++j) {
        WordTiming& prev = a[i];
        WordTiming& next = a[j];
        if ((prev.word.empty() || prev.word.back() != ' ') && in(next.word, kAppend)) {
            prev.word += next.word;
            prev.tokens.insert(prev.tokens.end(), next.tokens.begin(), next.tokens.end());
            next.word.clear();
            next.tokens.clear();
        } else {
            i = j;
        }
    }
}

}  // namespace

std::vector<WordTiming> find_alignment(WhisperDecoder& decoder, const WhisperTokenizer& tokenizer,
                                       std::span<const int> sot_sequence,
                                       std::span<const int> text_tokens, int num_frames,
                                       ThreadPool& pool, int median_filter_width) {
    if (text_tokens.empty()) return {};
    const WhisperModel& model = decoder.model();
    const WhisperConfig& c = model.config();
    const int eot = model.tokens().eot;
    const auto heads = static_cast<int>(model.alignment_heads().size());
    if (heads == 0) throw Error("Whisper word timing: the model has no alignment heads");

    // 1. One forced pass, logits at each text token's position.
    std::vector<int> input(sot_sequence.begin(), sot_sequence.end());
    input.push_back(model.tokens().no_timestamps);
    input.insert(input.end(), text_tokens.begin(), text_tokens.end());
    input.push_back(eot);
    const int offset = static_cast<int>(sot_sequence.size());
    const int n_text = static_cast<int>(text_tokens.size());
    const int T = static_cast<int>(input.size());
    std::vector<int> rows(static_cast<size_t>(n_text));
    for (int t = 0; t < n_text; ++t) rows[static_cast<size_t>(t)] = offset + t;
    std::vector<float> logits;
    decoder.reset();
    decoder.set_capture_alignment(true);
    decoder.feed(input, rows, logits, pool);
    decoder.set_capture_alignment(false);
    const std::vector<float> scores = decoder.cross_scores();  // (heads, T, n_audio_ctx)
    decoder.reset();

    const auto V = static_cast<size_t>(c.n_vocab);
    std::vector<float> token_probs(static_cast<size_t>(n_text));
    for (int t = 0; t < n_text; ++t) {
        const float* l = logits.data() + static_cast<size_t>(t) * V;
        const float mx = *std::max_element(l, l + eot);
        double z = 0;
        for (int k = 0; k < eot; ++k) z += std::exp(static_cast<double>(l[k]) - mx);
        token_probs[static_cast<size_t>(t)] = static_cast<float>(
            std::exp(static_cast<double>(l[text_tokens[static_cast<size_t>(t)]]) - mx) / z);
    }

    // 2. Per head: cut, softmax over time, standardize over tokens, median filter; mean of heads.
    const int F = std::min(num_frames / 2, c.n_audio_ctx);
    if (F <= 0) return {};
    const auto TF = static_cast<size_t>(T) * static_cast<size_t>(F);
    std::vector<float> w(static_cast<size_t>(heads) * TF), mean(TF, 0.0f);
    pool.parallel_for(heads, [&](int64_t a0, int64_t a1, int) {
        std::vector<float> window(static_cast<size_t>(median_filter_width)),
            row(static_cast<size_t>(F));
        for (int64_t a = a0; a < a1; ++a) {
            float* wa = w.data() + static_cast<size_t>(a) * TF;
            for (int i = 0; i < T; ++i) {
                const float* s = scores.data() + (static_cast<size_t>(a) * static_cast<size_t>(T) +
                                                  static_cast<size_t>(i)) *
                                                     static_cast<size_t>(c.n_audio_ctx);
                float* r = wa + static_cast<size_t>(i) * static_cast<size_t>(F);
                const float mx = *std::max_element(s, s + F);
                float sum = 0;
                for (int f = 0; f < F; ++f) sum += (r[f] = std::exp(s[f] - mx));
                for (int f = 0; f < F; ++f) r[f] /= sum;
            }
            for (int f = 0; f < F; ++f) {
                double m = 0, v = 0;
                for (int i = 0; i < T; ++i)
                    m += wa[static_cast<size_t>(i) * static_cast<size_t>(F) +
                            static_cast<size_t>(f)];
                m /= T;
                for (int i = 0; i < T; ++i) {
                    const double e = wa[static_cast<size_t>(i) * static_cast<size_t>(F) +
                                        static_cast<size_t>(f)] -
                                     m;
                    v += e * e;
                }
                v /= T;
                const double inv = 1.0 / std::sqrt(v);
                for (int i = 0; i < T; ++i) {
                    float& x = wa[static_cast<size_t>(i) * static_cast<size_t>(F) +
                                  static_cast<size_t>(f)];
                    x = static_cast<float>((x - m) * inv);
                }
            }
            const int rank = median_filter_width / 2;
            if (F > rank) {
                for (int i = 0; i < T; ++i) {
                    float* r = wa + static_cast<size_t>(i) * static_cast<size_t>(F);
                    std::copy_n(r, F, row.data());
                    for (int j = 0; j < F; ++j) {
                        for (int k = -rank; k <= rank; ++k) {
                            int read = std::abs(j + k);
                            if (read >= F) read = F - (read - F) - 2;
                            window[static_cast<size_t>(k + rank)] = row[static_cast<size_t>(read)];
                        }
                        std::nth_element(window.begin(), window.begin() + rank, window.end());
                        r[j] = window[static_cast<size_t>(rank)];
                    }
                }
            }
        }
    });
    for (int a = 0; a < heads; ++a)
        for (size_t k = 0; k < TF; ++k) mean[k] += w[static_cast<size_t>(a) * TF + k];
    for (float& x : mean) x /= static_cast<float>(heads);

    // 3. The path through the rows of <|notimestamps|> and the text tokens.
    const std::vector<float> matrix(mean.begin() + static_cast<ptrdiff_t>(offset) * F,
                                    mean.begin() + static_cast<ptrdiff_t>(offset + n_text + 1) * F);
    const auto path = negative_dtw(matrix, n_text + 1, F);

    // 4. Words.
    std::vector<int> with_eot(text_tokens.begin(), text_tokens.end());
    with_eot.push_back(eot);
    std::vector<std::string> words;
    std::vector<std::vector<int>> word_tokens;
    split_words(tokenizer, with_eot, eot, words, word_tokens);
    if (word_tokens.size() <= 1) return {};
    std::vector<size_t> boundaries{0};
    for (size_t i = 0; i + 1 < word_tokens.size(); ++i)
        boundaries.push_back(boundaries.back() + word_tokens[i].size());
    std::vector<double> jump_times;
    for (size_t k = 0; k < path.size(); ++k)
        if (k == 0 || path[k].first != path[k - 1].first)
            jump_times.push_back(path[k].second / kTokensPerSecond);
    std::vector<WordTiming> out;
    for (size_t i = 0; i + 1 < boundaries.size(); ++i) {
        if (boundaries[i + 1] >= jump_times.size()) break;  // the path skipped rows: no time
        WordTiming wt;
        wt.word = words[i];
        wt.tokens = word_tokens[i];
        wt.start = jump_times[boundaries[i]];
        wt.end = jump_times[boundaries[i + 1]];
        double p = 0;
        for (size_t k = boundaries[i]; k < boundaries[i + 1]; ++k) p += token_probs[k];
        wt.probability =
            static_cast<float>(p / static_cast<double>(boundaries[i + 1] - boundaries[i]));
        out.push_back(std::move(wt));
    }
    return out;
}

double add_word_timestamps(std::vector<TimedSegment>& segments, WhisperDecoder& decoder,
                           const WhisperTokenizer& tokenizer, std::span<const int> sot_sequence,
                           int window_seek, int num_frames, double last_speech_timestamp,
                           ThreadPool& pool) {
    if (segments.empty()) return last_speech_timestamp;
    const int eot = decoder.model().tokens().eot;
    std::vector<int> text;
    std::vector<size_t> per_segment;  // text tokens of each segment
    for (const TimedSegment& s : segments) {
        size_t n = 0;
        for (const int t : s.tokens)
            if (t < eot) text.push_back(t), ++n;
        per_segment.push_back(n);
    }
    std::vector<WordTiming> a =
        find_alignment(decoder, tokenizer, sot_sequence, text, num_frames, pool);

    std::vector<double> durations;
    for (const WordTiming& w : a)
        if (w.end - w.start != 0) durations.push_back(w.end - w.start);
    const double median_duration = std::min(0.7, durations.empty() ? 0.0 : median(durations));
    const double max_duration = median_duration * 2;
    if (!durations.empty()) {
        for (size_t i = 1; i < a.size(); ++i) {
            if (a[i].end - a[i].start > max_duration) {
                if (in(a[i].word, kSentenceEnd))
                    a[i].end = a[i].start + max_duration;
                else if (in(a[i - 1].word, kSentenceEnd))
                    a[i].start = a[i].end - max_duration;
            }
        }
    }
    merge_punctuations(a);

    const double time_offset = window_seek / kFramesPerSecond;
    size_t word_index = 0;
    for (size_t si = 0; si < segments.size(); ++si) {
        TimedSegment& seg = segments[si];
        size_t saved = 0;
        std::vector<Word> words;
        while (word_index < a.size() && saved < per_segment[si]) {
            const WordTiming& t = a[word_index];
            if (!t.word.empty())
                words.push_back(Word{t.word, round2(time_offset + t.start),
                                     round2(time_offset + t.end), t.probability});
            saved += t.tokens.size();
            ++word_index;
        }
        // Beyond faster-whisper: a word that starts more than kRunaway seconds after the closing
        // timestamp the model gave its own segment means the text and the alignment disagree on
        // where the phrase is. Seen on the 54.5 s test recording (its clips twice): the second
        // window opens on a hallucinated repeat of the first window's last sentence, which the
        // model closes at 33.6 s, while the Q8_0 decoder's alignment finds that sentence where it
        // is really said, at 50.6-53.6 s; the next window would then start at 53.6 s, skipping
        // 20 s of speech nobody transcribed. Such words are pulled back to the segment's end,
        // so the seek follows the model's own timestamps.
        constexpr double kRunaway = 1.0;
        if (!words.empty() && words.back().start > seg.end + kRunaway) {
            for (Word& w : words) {
                w.start = std::min(w.start, seg.end);
                w.end = std::min(w.end, seg.end);
            }
        }
        if (!words.empty()) {
            // The first word after a pause is no longer than twice the median duration.
            if (words[0].end - last_speech_timestamp > median_duration * 4 &&
                (words[0].end - words[0].start > max_duration ||
                 (words.size() > 1 && words[1].end - words[0].start > max_duration * 2))) {
                if (words.size() > 1 && words[1].end - words[1].start > max_duration) {
                    const double boundary = std::max(words[1].end / 2, words[1].end - max_duration);
                    words[0].end = words[1].start = boundary;
                }
                words[0].start = std::max(0.0, words[0].end - max_duration);
            }
            // Prefer the segment's start when the first word is too long, else the word's.
            if (seg.start < words[0].end && seg.start - 0.5 > words[0].start)
                words[0].start = std::max(0.0, std::min(words[0].end - median_duration, seg.start));
            else
                seg.start = words[0].start;
            // Likewise at the end.
            if (seg.end > words.back().start && seg.end + 0.5 < words.back().end)
                words.back().end = std::max(words.back().start + median_duration, seg.end);
            else
                seg.end = words.back().end;
            last_speech_timestamp = seg.end;
        }
        seg.words = std::move(words);
    }
    return last_speech_timestamp;
}

}  // namespace sl::whisper
