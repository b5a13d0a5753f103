// Speech to text with pocketsphinx (Debian's en-us acoustic model, language model and dictionary):
// 16 kHz mono s16 audio in, timed Transcript blocks out, one per utterance. Utterances end at the
// pauses pocketsphinx's voice activity detector finds (ps_get_in_speech), or after 30 s of speech.
// Word times come from ps_seg_iter. Weak but real; runs on the calling thread at roughly real time
// or faster. One instance per audio track, used by one thread; instances are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/document/document.h"

namespace sl::ingest {

class SpeechToText {
public:
    // Where the model files live: $SIGHTLINE_POCKETSPHINX_MODEL, else Debian's
    // /usr/share/pocketsphinx/model/en-us (en-us/, en-us.lm.bin, cmudict-en-us.dict).
    static std::string model_dir();

    // A recogniser, or nullptr with the reason in `why_not` when the model files are missing or
    // pocketsphinx cannot start (the caller then goes on without a transcript).
    static std::unique_ptr<SpeechToText> create(std::string& why_not);
    ~SpeechToText();
    SpeechToText(const SpeechToText&) = delete;
    SpeechToText& operator=(const SpeechToText&) = delete;

    static constexpr int kSampleRate = 16000;

    // Feeds `n` samples whose first one plays at media time `t` (seconds). A jump in time (a gap
    // in the audio) ends the current utterance.
    void feed(const int16_t* samples, size_t n, double t);
    // Ends the last utterance and returns every Transcript block, in time order.
    std::vector<doc::Block> finish();

    // Seconds of audio fed so far.
    double seconds_fed() const { return static_cast<double>(total_samples_) / kSampleRate; }

private:
    struct Impl;
    explicit SpeechToText(std::unique_ptr<Impl> impl);
    void process(const int16_t* samples, size_t n);
    void end_utterance(bool keep);

    std::unique_ptr<Impl> impl_;
    std::vector<doc::Block> blocks_;
    double next_t_ = -1;       // media time of the next sample
    double utt_t0_ = 0;        // media time of the first sample of the utterance
    int64_t utt_samples_ = 0;  // samples fed into the current utterance
    bool speech_ = false;      // the detector heard speech in the current utterance
    int64_t total_samples_ = 0;
    // (samples fed before, media time) at the first sample and after each jump in time.
    std::vector<std::pair<int64_t, double>> anchors_;
};

}  // namespace sl::ingest
