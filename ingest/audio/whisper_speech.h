// Speech to text with Whisper (core/whisper) for a media file's audio track, used instead of
// pocketsphinx (speech_to_text.h) when a Whisper model is installed (scripts/setup.sh puts tiny.en
// in <cache>/models/whisper-tiny.en; $SIGHTLINE_WHISPER_MODEL names another CTranslate2 model
// folder, "off" turns Whisper off). The encoder's linears run int8 (CTranslate2's arithmetic, where
// the CPU has the int8 product's vector tier) and the decoder's Q8_0; $SIGHTLINE_WHISPER_COMPUTE
// = "q8", "float32" or "int8" picks another trade of speed and accuracy (whisper_speech.cpp).
//
// Bounded memory for long recordings: feed() appends the 16 kHz mono samples to a temporary file as
// the track is decoded (115 MB per hour of audio, removed afterwards; gaps in the media time are
// filled with silence so the file's offsets are media time), and finish() transcribes it window by
// window through an AudioSource that reads the file (core/whisper/transcriber.h: about one 30 s
// window of samples and features in memory, whatever the length), with progress and cancel.
// Blocks out: one Transcript block per Whisper segment (a phrase: [start, end) from its first and
// last words' times, core/whisper/word_timing.h), confidence exp(average log-probability).
//
// One instance per audio track, used by one thread. The model is loaded once per process and
// shared (immutable; the transcription runs on the calling thread with its own thread pool).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/document/document.h"

namespace sl::ingest {

class WhisperSpeech {
public:
    static constexpr int kSampleRate = 16000;

    // The model folder to use: the settings' (set_settings), else $SIGHTLINE_WHISPER_MODEL, else the
    // default tiny.en; empty when Whisper is turned off ("off") or the folder has no model.bin.
    static std::string model_dir();
    // Process-wide choices that take precedence over the environment (the desktop's settings):
    // the model folder ("off" turns Whisper off) and the arithmetic ("default", "q8", "float32",
    // "int8"; see whisper_speech.cpp); an empty string leaves the environment's. Thread-safe;
    // applies to the transcriptions created after it.
    static void set_settings(const std::string& model_dir, const std::string& compute);
    // The arithmetic transcriptions use now: "default", "q8", "float32" or "int8" (anything else
    // asked for reads as "default").
    static std::string compute();

    // A transcriber, or nullptr with the reason in `why_not` (no model installed, the model cannot
    // be read, no temporary file): the caller falls back to pocketsphinx.
    static std::unique_ptr<WhisperSpeech> create(std::string& why_not);
    ~WhisperSpeech();
    WhisperSpeech(const WhisperSpeech&) = delete;
    WhisperSpeech& operator=(const WhisperSpeech&) = delete;

    // Samples whose first one plays at media time `t` (seconds).
    void feed(const int16_t* samples, size_t n, double t);

    // Transcribes everything fed. progress(done seconds, total seconds) after each window; returning
    // false stops (the blocks so far are returned). Throws sl::Error when the model fails.
    std::vector<doc::Block> finish(const std::function<bool(double, double)>& progress = {});

    // "whisper tiny.en" (the model folder's name), for the document's metadata.
    std::string engine() const;
    double seconds_fed() const { return static_cast<double>(written_) / kSampleRate; }

    struct Shared;  // the loaded model and tokenizer (opaque)

private:
    WhisperSpeech(std::shared_ptr<const Shared> model, std::FILE* file, std::string dir);

    std::shared_ptr<const Shared> model_;
    std::FILE* file_ = nullptr;  // tmpfile(): removed when closed
    std::string dir_;
    int64_t written_ = 0;        // samples in the file
};

}  // namespace sl::ingest
