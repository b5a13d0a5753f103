#include "ingest/audio/speech_to_text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>

namespace sl::ingest {

namespace {

constexpr double kMaxUtterance = 30.0;  // seconds of speech before an utterance is cut
constexpr double kMaxSilence = 30.0;    // seconds of silence before the decoder is reset
constexpr size_t kPiece = 1600;         // samples per ps_process_raw call (0.1 s)

bool is_filler(const std::string& w) {
    return w.empty() || w == "<s>" || w == "</s>" || w == "<sil>" || w == "(NULL)" ||
           w.front() == '[' || (w.size() >= 2 && w[0] == '+' && w[1] == '+');
}

// "read(2)" -> "read": the dictionary's alternate pronunciations.
std::string base_word(const char* w) {
    std::string s(w ? w : "");
    const size_t paren = s.find('(');
    if (paren != std::string::npos && paren > 0 && s.back() == ')') s.erase(paren);
    return s;
}

}  // namespace

struct SpeechToText::Impl {
    ps_decoder_t* ps = nullptr;
    ~Impl() {
        if (ps) ps_free(ps);
    }
};

SpeechToText::SpeechToText(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SpeechToText::~SpeechToText() = default;

std::string SpeechToText::model_dir() {
    if (const char* env = std::getenv("SIGHTLINE_POCKETSPHINX_MODEL"); env && *env) return env;
    return "/usr/share/pocketsphinx/model/en-us";
}

std::unique_ptr<SpeechToText> SpeechToText::create(std::string& why_not) {
    namespace fs = std::filesystem;
    const fs::path dir(model_dir());
    const std::string hmm = (dir / "en-us").string();
    const std::string lm = (dir / "en-us.lm.bin").string();
    const std::string dict = (dir / "cmudict-en-us.dict").string();
    std::error_code ec;
    if (!fs::is_directory(hmm, ec) || !fs::is_regular_file(lm, ec) ||
        !fs::is_regular_file(dict, ec)) {
        why_not = "the pocketsphinx en-us model is not installed (" + dir.string() +
                  "; Debian package pocketsphinx-en-us)";
        return nullptr;
    }
    static std::once_flag quiet;
    std::call_once(quiet, [] { err_set_logfp(nullptr); });  // sphinxbase logs to stderr
    cmd_ln_t* config = cmd_ln_init(nullptr, ps_args(), TRUE, "-hmm", hmm.c_str(), "-lm", lm.c_str(),
                                   "-dict", dict.c_str(), "-logfn", "/dev/null", nullptr);
    if (!config) {
        why_not = "pocketsphinx rejected its configuration";
        return nullptr;
    }
    auto impl = std::make_unique<Impl>();
    impl->ps = ps_init(config);
    cmd_ln_free_r(config);  // the decoder keeps its own reference
    if (!impl->ps || ps_start_utt(impl->ps) < 0) {
        why_not = "pocketsphinx could not load the model in " + dir.string();
        return nullptr;
    }
    return std::unique_ptr<SpeechToText>(new SpeechToText(std::move(impl)));
}

void SpeechToText::feed(const int16_t* samples, size_t n, double t) {
    if (n == 0) return;
    if (next_t_ < 0 || std::abs(t - next_t_) > 0.5) {
        // First audio, or a gap/jump: start a fresh utterance at the new time.
        if (utt_samples_ > 0) end_utterance(speech_);
        next_t_ = t;
        utt_t0_ = t;
        anchors_.emplace_back(total_samples_, t);
    }
    for (size_t off = 0; off < n; off += kPiece) process(samples + off, std::min(kPiece, n - off));
}

void SpeechToText::process(const int16_t* samples, size_t n) {
    if (utt_samples_ == 0) utt_t0_ = next_t_;
    ps_process_raw(impl_->ps, samples, n, FALSE, FALSE);
    utt_samples_ += static_cast<int64_t>(n);
    total_samples_ += static_cast<int64_t>(n);
    next_t_ += static_cast<double>(n) / kSampleRate;
    const bool in_speech = ps_get_in_speech(impl_->ps) != 0;
    const double utt_len = static_cast<double>(utt_samples_) / kSampleRate;
    if (in_speech) speech_ = true;
    if (speech_ && (!in_speech || utt_len > kMaxUtterance))
        end_utterance(true);
    else if (!speech_ && utt_len > kMaxSilence)
        end_utterance(false);
}

void SpeechToText::end_utterance(bool keep) {
    ps_decoder_t* ps = impl_->ps;
    ps_end_utt(ps);
    if (keep) {
        // Frame numbers count from the first sample the decoder got, silence included, at 100
        // frames a second; anchors map them back to media time across gaps.
        auto frame_time = [&](int frame) {
            const auto at = static_cast<int64_t>(frame) * (kSampleRate / 100);
            auto a = std::upper_bound(anchors_.begin(), anchors_.end(), at,
                                      [](int64_t x, const auto& y) { return x < y.first; });
            if (a != anchors_.begin()) --a;
            return a->second + static_cast<double>(at - a->first) / kSampleRate;
        };
        logmath_t* lmath = ps_get_logmath(ps);
        std::string text;
        double first = -1, last = 0, conf_sum = 0;
        int words = 0;
        for (ps_seg_t* seg = ps_seg_iter(ps); seg; seg = ps_seg_next(seg)) {
            const std::string w = base_word(ps_seg_word(seg));
            if (is_filler(w)) continue;
            int sf = 0, ef = 0;
            ps_seg_frames(seg, &sf, &ef);
            int32 ascr = 0, lscr = 0, lback = 0;
            const int32 post = ps_seg_prob(seg, &ascr, &lscr, &lback);
            conf_sum += std::clamp(logmath_exp(lmath, post), 0.0, 1.0);
            ++words;
            if (first < 0) first = frame_time(sf);
            last = frame_time(ef + 1);
            if (!text.empty()) text += ' ';
            text += w;
        }
        if (words > 0) {
            doc::Block b;
            b.role = doc::BlockRole::Transcript;
            b.text = std::move(text);
            const double utt_end = utt_t0_ + static_cast<double>(utt_samples_) / kSampleRate;
            const double t0 = std::clamp(first, utt_t0_, utt_end);
            b.time = doc::TimeRange{t0, std::clamp(last, t0, utt_end)};
            b.confidence = static_cast<float>(conf_sum / words);
            blocks_.push_back(std::move(b));
        }
    }
    ps_start_utt(ps);
    utt_samples_ = 0;
    speech_ = false;
}

std::vector<doc::Block> SpeechToText::finish() {
    if (utt_samples_ > 0) end_utterance(speech_);
    ps_end_utt(impl_->ps);
    return std::move(blocks_);
}

}  // namespace sl::ingest
