#include "ingest/audio/whisper_speech.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/whisper/audio_source.h"
#include "core/whisper/transcriber.h"
#include "core/whisper/whisper_model.h"
#include "core/whisper/whisper_tokenizer.h"

namespace sl::ingest {

namespace fs = std::filesystem;

struct WhisperSpeech::Shared {
    whisper::WhisperModel model;
    whisper::WhisperTokenizer tokenizer;
};

namespace {

constexpr double kMaxGapSeconds = 4 * 3600.0;  // a jump further than this in media time is not padded

// The temporary file as an AudioSource: s16 samples read back as floats, window by window.
class FileAudioSource final : public whisper::AudioSource {
public:
    FileAudioSource(std::FILE* f, int64_t n) : f_(f), n_(n) {}
    int64_t size() const override { return n_; }
    void read(int64_t begin, int64_t n, float* out) override {
        if (begin < 0 || n < 0 || begin + n > n_) throw Error("the transcript's audio: a read outside the recording");
        buf_.resize(static_cast<size_t>(n));
        if (std::fseek(f_, static_cast<long>(begin * 2), SEEK_SET) != 0 ||
            std::fread(buf_.data(), 2, static_cast<size_t>(n), f_) != static_cast<size_t>(n))
            throw IoError("the transcript's audio: cannot read the temporary file back");
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(buf_[static_cast<size_t>(i)]) / 32768.0f;
    }

private:
    std::FILE* f_;
    int64_t n_;
    std::vector<int16_t> buf_;
};

// $SIGHTLINE_WHISPER_COMPUTE picks the arithmetic (word errors on tests/reference/whisper/
// wer_eval.py --seeds 8, 3,816 words; seconds for 54.5 s of audio on 2 cores, side_by_side.py):
//   (unset), "default": the encoder's linears int8 as CTranslate2 computes them, the decoder's and
//             the output projection Q8_0 (11.2 %; faster than faster-whisper's int8, whose word
//             errors on the same passes are 12.1 %)
//   "q8":      the encoder float32, the decoder Q8_0 (10.6 %; ~15 % slower than the default)
//   "float32": everything float32, CTranslate2's float32 to the digit (10.5 %; ~1.5x the default)
//   "int8":    CTranslate2's int8 (encoder and decoder int8; 12.3 %, as faster-whisper's int8)
// Anything else is the default. int8 needs the CPU's int8 product (AVX-512 VNNI); elsewhere those
// linears stay float32.
// The settings' overrides (set_settings), else the environment's.
std::mutex settings_mu;
std::string settings_model, settings_compute;

std::string setting(const std::string& over, const char* env_name) {
    {
        std::lock_guard lock(settings_mu);
        if (!over.empty()) return over;
    }
    const char* env = std::getenv(env_name);
    return env ? env : "";
}

std::string compute_setting() {
    std::string v;
    {
        std::lock_guard lock(settings_mu);
        v = settings_compute;
    }
    if (v.empty()) {
        const char* env = std::getenv("SIGHTLINE_WHISPER_COMPUTE");
        v = env ? env : "";
    }
    return v == "q8" || v == "float32" || v == "int8" ? v : "default";
}

whisper::WhisperLoadOptions compute_options() {
    const std::string v = compute_setting();
    whisper::WhisperLoadOptions o;
    if (v == "float32") return o;
    if (v == "int8") {
        o.int8 = true;
        return o;
    }
    o.q8_decoder = true;
    o.int8 = v != "q8";
    return o;
}

// One model per folder and compute type per process (the last one asked for).
std::shared_ptr<const WhisperSpeech::Shared> load_shared(const std::string& dir) {
    static std::mutex mu;
    static std::string loaded_key;
    static std::shared_ptr<const WhisperSpeech::Shared> loaded;
    const whisper::WhisperLoadOptions options = compute_options();
    const std::string key = dir + (options.int8 ? "\n8" : "\n32") + (options.q8_decoder ? "q8" : "");
    std::lock_guard lock(mu);
    if (loaded && loaded_key == key) return loaded;
    auto model = whisper::WhisperModel::open(dir, options);
    const auto& c = model.config();
    auto tokenizer = whisper::WhisperTokenizer::open(dir, c.n_vocab, model.tokens().eot);
    loaded = std::make_shared<const WhisperSpeech::Shared>(WhisperSpeech::Shared{std::move(model), std::move(tokenizer)});
    loaded_key = key;
    return loaded;
}

}  // namespace

void WhisperSpeech::set_settings(const std::string& model_dir, const std::string& compute) {
    std::lock_guard lock(settings_mu);
    settings_model = model_dir;
    settings_compute = compute;
}

std::string WhisperSpeech::compute() { return compute_setting(); }

std::string WhisperSpeech::model_dir() {
    const std::string set = setting(settings_model, "SIGHTLINE_WHISPER_MODEL");
    std::string dir = !set.empty() ? set : whisper::WhisperModel::default_dir().string();
    if (dir == "off") return {};
    std::error_code ec;
    return fs::exists(fs::path(dir) / "model.bin", ec) ? dir : std::string();
}

std::unique_ptr<WhisperSpeech> WhisperSpeech::create(std::string& why_not) {
    const std::string dir = model_dir();
    if (dir.empty()) {
        why_not = "no Whisper model installed (" + whisper::WhisperModel::default_dir().string() + ")";
        return nullptr;
    }
    std::shared_ptr<const Shared> model;
    try {
        model = load_shared(dir);
    } catch (const Error& e) {
        why_not = e.what();
        return nullptr;
    }
    std::FILE* f = std::tmpfile();
    if (!f) {
        why_not = "no temporary file for the audio";
        return nullptr;
    }
    return std::unique_ptr<WhisperSpeech>(new WhisperSpeech(std::move(model), f, dir));
}

WhisperSpeech::WhisperSpeech(std::shared_ptr<const Shared> model, std::FILE* file, std::string dir)
    : model_(std::move(model)), file_(file), dir_(std::move(dir)) {}

WhisperSpeech::~WhisperSpeech() {
    if (file_) std::fclose(file_);
}

std::string WhisperSpeech::engine() const {
    std::string name = fs::path(dir_).filename().string();
    if (name.rfind("whisper-", 0) == 0) name.erase(0, 8);
    return "whisper " + name;
}

void WhisperSpeech::feed(const int16_t* samples, size_t n, double t) {
    if (!file_ || n == 0) return;
    // Silence up to the sample's media time, so file offsets stay media time.
    const double gap = t - static_cast<double>(written_) / kSampleRate;
    if (gap > 0.05 && gap < kMaxGapSeconds) {
        const auto zeros = static_cast<int64_t>(std::llround(gap * kSampleRate));
        const std::vector<int16_t> silence(static_cast<size_t>(std::min<int64_t>(zeros, kSampleRate)), 0);
        for (int64_t left = zeros; left > 0;) {
            const auto k = static_cast<size_t>(std::min<int64_t>(left, kSampleRate));
            if (std::fwrite(silence.data(), 2, k, file_) != k) throw IoError("the transcript's audio: cannot write the temporary file");
            written_ += static_cast<int64_t>(k);
            left -= static_cast<int64_t>(k);
        }
    }
    if (std::fwrite(samples, 2, n, file_) != n) throw IoError("the transcript's audio: cannot write the temporary file");
    written_ += static_cast<int64_t>(n);
}

std::vector<doc::Block> WhisperSpeech::finish(const std::function<bool(double, double)>& progress) {
    std::vector<doc::Block> blocks;
    if (!file_ || written_ < kSampleRate / 10) return blocks;
    std::fflush(file_);
    FileAudioSource source(file_, written_);
    whisper::TranscribeOptions o;
    o.progress = progress;
    // Word times from cross-attention: a segment's bounds follow its first and last words, so a
    // phrase after a long silence starts when it is said (without them Whisper's first timestamp
    // of a window may sit at the start of the silence).
    o.word_timestamps = true;
    ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    const whisper::Transcript t = whisper::transcribe(model_->model, model_->tokenizer, source, o, pool);
    for (const auto& s : t.segments) {
        std::string text = s.text;
        const size_t b = text.find_first_not_of(" \t\n");
        if (b == std::string::npos) continue;
        text = text.substr(b);
        while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
        doc::Block blk;
        blk.role = doc::BlockRole::Transcript;
        blk.text = std::move(text);
        // Within the audio fed: the last window's final timestamp may point past its end.
        const double end = seconds_fed();
        const double t0 = std::min(s.start, end), t1 = std::min(std::max(s.end, s.start + 0.01), end);
        blk.time = doc::TimeRange{t0, std::max(t1, t0)};
        blk.confidence = static_cast<float>(std::clamp(std::exp(s.avg_logprob), 0.0, 1.0));
        blocks.push_back(std::move(blk));
    }
    return blocks;
}

}  // namespace sl::ingest
