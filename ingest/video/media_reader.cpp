#include "ingest/video/media_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "ingest/audio/audio_track.h"
#include "ingest/audio/speech_to_text.h"
#include "ingest/audio/whisper_speech.h"
#include "ingest/ingest_error.h"
#include "ingest/video/media_input.h"
#include "ingest/video/subtitle_track.h"
#include "ingest/video/subtitles.h"
#include "ingest/video/video_track.h"

namespace sl::ingest {

namespace {

constexpr size_t kMaxSidecarBytes = 16u << 20;
constexpr int kMaxReadErrors = 32;  // consecutive demuxer errors before giving up on the rest

std::string number(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string tag(const AVDictionary* d, const char* key) {
    const AVDictionaryEntry* e = av_dict_get(d, key, nullptr, 0);
    return e && e->value ? std::string(e->value) : std::string();
}

// Picks the main video stream: not cover art; FFmpeg's best guess when it qualifies.
int pick_video_stream(AVFormatContext* fmt) {
    auto ok = [&](int i) {
        return i >= 0 && fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
               !(fmt->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC);
    };
    const int best = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (ok(best)) return best;
    for (unsigned i = 0; i < fmt->nb_streams; ++i)
        if (ok(static_cast<int>(i))) return static_cast<int>(i);
    return -1;
}

void copy_tags(const AVDictionary* tags, doc::Document& d) {
    const AVDictionaryEntry* e = nullptr;
    int n = 0;
    while ((e = av_dict_get(tags, "", e, AV_DICT_IGNORE_SUFFIX)) && n < 64) {
        if (!e->key || !e->value) continue;
        std::string key(e->key);
        for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value(e->value);
        if (value.size() > 1000) value.resize(1000);
        d.metadata.emplace("tag:" + key, std::move(value));
        ++n;
    }
}

class MediaDocumentBuilder {
public:
    MediaDocumentBuilder(MediaInput& in, IngestContext& ctx, const MediaReadOptions& options,
                         const std::string& sidecar_for)
        : in_(in), ctx_(ctx), options_(options), sidecar_for_(sidecar_for) {}

    doc::Document build();

private:
    void open_tracks();
    void demux();
    void finish_tracks();
    double media_duration() const;
    void assemble(doc::Document& d, double duration);

    MediaInput& in_;
    IngestContext& ctx_;
    const MediaReadOptions& options_;
    std::string sidecar_for_;
    doc::Document doc_;
    int video_index_ = -1, audio_index_ = -1;
    std::unique_ptr<VideoTrack> video_;
    std::unique_ptr<AudioTrack> audio_;
    std::unique_ptr<SpeechToText> stt_;      // pocketsphinx, when no Whisper model is installed
    std::unique_ptr<WhisperSpeech> whisper_;
    std::vector<std::unique_ptr<SubtitleTrack>> subs_;  // indexed by stream
    std::vector<doc::Block> blocks_;
    int64_t packets_ = 0, corrupt_ = 0;
};

void MediaDocumentBuilder::open_tracks() {
    AVFormatContext* fmt = in_.format();
    const IngestOptions& o = ctx_.options();
    const std::string& name = in_.name();
    video_index_ = pick_video_stream(fmt);
    audio_index_ = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
    subs_.resize(fmt->nb_streams);
    std::string sub_codecs;
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
        AVStream* st = fmt->streams[i];
        st->discard = AVDISCARD_ALL;
        if (st->codecpar->codec_type != AVMEDIA_TYPE_SUBTITLE) continue;
        auto track = std::make_unique<SubtitleTrack>(st, in_.start_offset());
        if (!sub_codecs.empty()) sub_codecs += ',';
        sub_codecs += track->codec_name();
        if (track->usable()) {
            st->discard = AVDISCARD_DEFAULT;
            subs_[i] = std::move(track);
        }
    }
    if (!sub_codecs.empty()) doc_.metadata["subtitle_codecs"] = sub_codecs;

    if (video_index_ >= 0) {
        AVStream* st = fmt->streams[video_index_];
        const AVCodecParameters* par = st->codecpar;
        doc_.metadata["video_codec"] = avcodec_get_name(par->codec_id);
        doc_.metadata["width"] = std::to_string(par->width);
        doc_.metadata["height"] = std::to_string(par->height);
        const AVRational fr = av_guess_frame_rate(fmt, st, nullptr);
        if (fr.num > 0 && fr.den > 0) doc_.metadata["fps"] = number(av_q2d(fr), 3);
        if (o.max_frames_per_minute > 0) {
            VideoTrackConfig vc;
            vc.max_frames_per_minute = o.max_frames_per_minute;
            vc.duration = in_.duration();
            vc.start_offset = in_.start_offset();
            vc.max_duration_s = o.max_duration_s;
            vc.max_dimension = o.max_video_dimension;
            vc.thumbnail_px = o.thumbnail_px;
            vc.threads = options_.decoder_threads;
            try {
                video_ = std::make_unique<VideoTrack>(name, st, vc);
                st->discard = AVDISCARD_DEFAULT;
            } catch (const IngestError& e) {
                doc_.metadata["video_decoder"] = e.what();  // go on with sound and text
            }
        }
    }
    if (audio_index_ >= 0) {
        AVStream* st = fmt->streams[audio_index_];
        const AVCodecParameters* par = st->codecpar;
        doc_.metadata["audio_codec"] = avcodec_get_name(par->codec_id);
        doc_.metadata["sample_rate"] = std::to_string(par->sample_rate);
        doc_.metadata["channels"] = std::to_string(par->ch_layout.nb_channels);
        // Audio is decoded to transcribe it, or to check that an audio-only file holds sound.
        const bool audio_only = video_index_ < 0 && sub_codecs.empty();
        if (o.transcribe || options_.decode_audio || audio_only) {
            if (o.transcribe) {
                // Whisper when a model is installed; pocketsphinx otherwise. The document says
                // which engine heard the audio (metadata "transcript").
                std::string why_not_whisper, why_not;
                whisper_ = WhisperSpeech::create(why_not_whisper);
                if (whisper_) {
                    doc_.metadata["transcript"] = whisper_->engine();
                } else {
                    stt_ = SpeechToText::create(why_not);
                    doc_.metadata["transcript"] = stt_ ? "pocketsphinx (" + why_not_whisper + ")" : "unavailable: " + why_not;
                }
            }
            SpeechToText* stt = stt_.get();
            WhisperSpeech* whisper = whisper_.get();
            try {
                audio_ =
                    std::make_unique<AudioTrack>(name, st, in_.start_offset(), o.max_duration_s,
                                                 [stt, whisper](const int16_t* s, size_t n, double t) {
                                                     if (whisper) whisper->feed(s, n, t);
                                                     else if (stt) stt->feed(s, n, t);
                                                 });
                st->discard = AVDISCARD_DEFAULT;
            } catch (const IngestError& e) {
                doc_.metadata["audio_decoder"] = e.what();
                stt_.reset();
                whisper_.reset();
            }
        }
    }
}

void MediaDocumentBuilder::demux() {
    AVFormatContext* fmt = in_.format();
    const std::string& name = in_.name();
    const double duration = in_.duration();
    av::PacketPtr pkt = av::make_packet();
    int errors = 0;
    while (true) {
        ctx_.check_cancelled(name);
        const int r = av_read_frame(fmt, pkt.get());
        if (r < 0) {
            // End of file, a truncated file, or damage the demuxer cannot skip: keep what we have.
            if (r == AVERROR_EOF || r == AVERROR_EXIT || (fmt->pb && avio_feof(fmt->pb))) break;
            ++corrupt_;
            if (++errors > kMaxReadErrors) break;
            continue;
        }
        errors = 0;
        av::PacketUnref unref(pkt.get());
        const int si = pkt->stream_index;
        if (si < 0 || static_cast<unsigned>(si) >= fmt->nb_streams) continue;
        ++packets_;
        if (pkt->flags & AV_PKT_FLAG_CORRUPT) ++corrupt_;
        if (si == video_index_ && video_)
            video_->on_packet(pkt.get());
        else if (si == audio_index_ && audio_)
            audio_->on_packet(pkt.get());
        else if (static_cast<size_t>(si) < subs_.size() && subs_[static_cast<size_t>(si)])
            subs_[static_cast<size_t>(si)]->on_packet(pkt.get());  // (streams found late: none)
        const int64_t ts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
        if (duration > 0 && ts != AV_NOPTS_VALUE) {
            const double t =
                static_cast<double>(ts) * av_q2d(fmt->streams[si]->time_base) - in_.start_offset();
            ctx_.progress(std::clamp(t / duration, 0.0, 0.99), "reading media");
        }
    }
    ctx_.check_cancelled(name);
}

void MediaDocumentBuilder::finish_tracks() {
    if (video_) video_->finish();
    if (audio_) audio_->finish();
    for (auto& s : subs_) {
        if (!s) continue;
        corrupt_ += s->corrupt_packets();
        for (auto& b : s->blocks()) blocks_.push_back(std::move(b));
    }
    if (stt_) {
        std::vector<doc::Block> transcript = stt_->finish();
        doc_.metadata["transcript_seconds"] = number(stt_->seconds_fed(), 1);
        doc_.add_note("speech transcribed by " + doc_.metadata["transcript"] + ": " + std::to_string(transcript.size()) +
                      (transcript.size() == 1 ? " utterance" : " utterances"));
        for (auto& b : transcript) blocks_.push_back(std::move(b));
    }
    if (whisper_) {
        const std::string& name = in_.name();
        bool stopped = false;
        std::vector<doc::Block> transcript = whisper_->finish([&](double done, double total) {
            ctx_.progress(total > 0 ? done / total : 1.0, "transcribing speech (" + whisper_->engine() + ")");
            stopped = ctx_.cancelled();
            return !stopped;
        });
        if (stopped) ctx_.check_cancelled(name);
        doc_.metadata["transcript_seconds"] = number(whisper_->seconds_fed(), 1);
        doc_.add_note("speech transcribed by " + whisper_->engine() + ": " + std::to_string(transcript.size()) +
                      (transcript.size() == 1 ? " phrase" : " phrases"));
        for (auto& b : transcript) blocks_.push_back(std::move(b));
    }
    if (video_) corrupt_ += video_->corrupt_packets();
    if (audio_) corrupt_ += audio_->corrupt_packets();
    if (!sidecar_for_.empty() && options_.sidecar_subtitles) {
        std::string used;
        for (const std::string& path : find_sidecar_subtitles(sidecar_for_)) {
            std::error_code ec;
            const auto bytes = std::filesystem::file_size(path, ec);
            if (!ec && bytes > kMaxSidecarBytes) {
                doc_.add_note("the subtitle file " + std::filesystem::path(path).filename().string() +
                              " (" + std::to_string(bytes >> 20) + " MiB) is over the limit of " +
                              std::to_string(kMaxSidecarBytes >> 20) + " MiB for subtitles: not read");
                continue;
            }
            std::vector<doc::Block> cues = read_sidecar_subtitles(path, kMaxSidecarBytes);
            if (cues.empty()) continue;
            if (!used.empty()) used += ',';
            used += std::filesystem::path(path).filename().string();
            for (auto& b : cues) blocks_.push_back(std::move(b));
        }
        if (!used.empty()) doc_.metadata["sidecar_subtitles"] = used;
    }
}

double MediaDocumentBuilder::media_duration() const {
    double d = in_.duration();
    if (video_ && video_->last_time() >= 0)
        d = std::max(d, video_->last_time() + video_->frame_duration());
    if (audio_ && audio_->last_time() > 0) d = std::max(d, audio_->last_time());
    if (d <= 0)  // subtitles only: as long as the text
        for (const auto& b : blocks_) d = std::max(d, b.time ? b.time->t1 : 0.0);
    return std::min(d, ctx_.options().max_duration_s);
}

void MediaDocumentBuilder::assemble(doc::Document& d, double duration) {
    const double seg = options_.segment_seconds > 0 ? options_.segment_seconds : 30.0;
    const int n = std::max(1, static_cast<int>(std::ceil(duration / seg - 1e-9)));
    d.units.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        doc::Unit& u = d.units[static_cast<size_t>(i)];
        u.kind = doc::UnitKind::Segment;
        u.index = i;
        u.label = time_label(i * seg);
        u.time = doc::TimeRange{i * seg, std::min((i + 1) * seg, std::max(duration, i * seg))};
        if (video_) {
            u.width = static_cast<float>(video_->width());
            u.height = static_cast<float>(video_->height());
        }
    }
    auto unit_of = [&](double t) {
        const double k = std::floor(std::max(t, 0.0) / seg);
        return static_cast<size_t>(std::min<double>(k, n - 1));
    };
    if (video_)
        for (auto& v : video_->frames())
            d.units[unit_of(*v.timestamp)].visuals.push_back(std::move(v));
    std::stable_sort(blocks_.begin(), blocks_.end(), [](const doc::Block& a, const doc::Block& b) {
        return a.time->t0 < b.time->t0;
    });
    for (auto& b : blocks_) d.units[unit_of(b.time->t0)].blocks.push_back(std::move(b));

    const AVFormatContext* fmt = in_.format();
    for (unsigned i = 0; i < fmt->nb_chapters && i < 10000; ++i) {
        const AVChapter* ch = fmt->chapters[i];
        doc::OutlineEntry e;
        e.title = tag(ch->metadata, "title");
        if (e.title.empty()) e.title = "Chapter " + std::to_string(i + 1);
        const double t =
            static_cast<double>(ch->start) * av_q2d(ch->time_base) - in_.start_offset();
        if (!std::isfinite(t)) continue;
        e.time = std::max(0.0, t);
        e.unit = static_cast<int>(unit_of(*e.time));
        d.outline.push_back(std::move(e));
    }
}

doc::Document MediaDocumentBuilder::build() {
    AVFormatContext* fmt = in_.format();
    const std::string& name = in_.name();
    doc_.metadata["format"] = fmt->iformat->name;
    if (fmt->iformat->long_name) doc_.metadata["format_name"] = fmt->iformat->long_name;
    copy_tags(fmt->metadata, doc_);
    open_tracks();
    ctx_.progress(0.0, "reading media");
    demux();
    finish_tracks();

    const int64_t decoded =
        (video_ ? video_->decoded_frames() : 0) + (audio_ ? audio_->decoded_frames() : 0);
    if (decoded == 0 && blocks_.empty() && (video_ || audio_ || corrupt_ > 0)) {
        if (corrupt_ > 0)
            throw IngestError(IngestErrorKind::Corrupt, name,
                              "no frame, sound or text could be decoded (" +
                                  std::to_string(corrupt_) + " damaged packets)");
        if (packets_ == 0)
            throw IngestError(IngestErrorKind::Corrupt, name,
                              "the file holds no media data after its header (truncated?)");
    }

    doc::Document d = std::move(doc_);
    d.path = name;
    d.kind = video_index_ >= 0 ? doc::DocumentKind::Video : doc::DocumentKind::Audio;
    d.title = tag(fmt->metadata, "title");
    if (d.title.empty()) d.title = std::filesystem::path(name).stem().string();
    d.duration = media_duration();
    d.metadata["duration"] = number(d.duration, 3);
    d.metadata["corrupt_packets"] = std::to_string(corrupt_);
    if (video_) {
        d.metadata["decoded_frames"] = std::to_string(video_->decoded_frames());
        d.metadata["sampled_frames"] = std::to_string(video_->frames().size());
    }
    assemble(d, d.duration);
    ctx_.progress(1.0, "reading media");
    return d;
}

}  // namespace

std::string time_label(double seconds) {
    const auto s = static_cast<int64_t>(std::floor(std::max(seconds, 0.0)));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
    return buf;
}

doc::Document read_media_file(const std::string& path, IngestContext& ctx,
                              const MediaReadOptions& options) {
    std::unique_ptr<MediaInput> in = MediaInput::open_file(path, ctx);
    return MediaDocumentBuilder(*in, ctx, options, path).build();
}

doc::Document read_media_memory(std::span<const uint8_t> bytes, const std::string& name,
                                IngestContext& ctx, const MediaReadOptions& options) {
    std::unique_ptr<MediaInput> in = MediaInput::open_memory(bytes, name, ctx);
    return MediaDocumentBuilder(*in, ctx, options, std::string()).build();
}

}  // namespace sl::ingest
