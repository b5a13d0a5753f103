#include "ingest/audio/audio_track.h"

#include <cmath>
#include <cstdio>

#include "ingest/audio/speech_to_text.h"
#include "ingest/ingest_error.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
}

namespace sl::ingest {

AudioTrack::AudioTrack(const std::string& name, AVStream* stream, double start_offset,
                       double max_duration_s, Sink sink)
    : name_(name),
      stream_(stream),
      offset_(start_offset),
      max_duration_(max_duration_s),
      sink_(std::move(sink)),
      frame_(av::make_frame()) {
    const AVCodecParameters* par = stream->codecpar;
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        throw IngestError(
            IngestErrorKind::Unsupported, name,
            std::string("no decoder for the audio codec ") + avcodec_get_name(par->codec_id));
    dec_.reset(avcodec_alloc_context3(codec));
    if (!dec_) throw std::bad_alloc();
    int err = avcodec_parameters_to_context(dec_.get(), par);
    if (err >= 0) {
        dec_->pkt_timebase = stream->time_base;
        dec_->thread_count = 1;
        err = avcodec_open2(dec_.get(), codec, nullptr);
    }
    if (err < 0)
        throw IngestError(IngestErrorKind::Corrupt, name,
                          std::string("cannot open the ") + codec->name +
                              " audio decoder: " + av::error_text(err));
}

AudioTrack::~AudioTrack() {
    av_channel_layout_uninit(&in_layout_);
}

void AudioTrack::on_packet(const AVPacket* packet) {
    send(packet);
}

void AudioTrack::send(const AVPacket* packet) {
    int err = avcodec_send_packet(dec_.get(), packet);
    if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF) ++corrupt_;
    while (true) {
        const int r = avcodec_receive_frame(dec_.get(), frame_.get());
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) break;
        if (r < 0) {
            ++corrupt_;
            break;
        }
        on_frame(frame_.get());
        av_frame_unref(frame_.get());
    }
    if (err == AVERROR(EAGAIN)) {
        err = avcodec_send_packet(dec_.get(), packet);
        if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF) ++corrupt_;
    }
}

bool AudioTrack::prepare_resampler(const AVFrame* frame) {
    AVChannelLayout layout{};
    if (frame->ch_layout.nb_channels > 0 && frame->ch_layout.order != AV_CHANNEL_ORDER_UNSPEC) {
        if (av_channel_layout_copy(&layout, &frame->ch_layout) < 0) return false;
    } else {
        const int channels = frame->ch_layout.nb_channels;
        if (channels <= 0 || channels > 64) return false;
        av_channel_layout_default(&layout, channels);
    }
    if (swr_ && frame->sample_rate == in_rate_ && frame->format == in_format_ &&
        av_channel_layout_compare(&layout, &in_layout_) == 0) {
        av_channel_layout_uninit(&layout);
        return true;
    }
    if (swr_) drain();
    swr_.reset();
    av_channel_layout_uninit(&in_layout_);
    in_layout_ = layout;  // takes ownership
    in_rate_ = frame->sample_rate;
    in_format_ = frame->format;
    if (in_rate_ <= 0 || in_rate_ > 1000000) return false;
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    SwrContext* swr = nullptr;
    if (swr_alloc_set_opts2(&swr, &mono, AV_SAMPLE_FMT_S16, SpeechToText::kSampleRate, &in_layout_,
                            static_cast<AVSampleFormat>(in_format_), in_rate_, 0, nullptr) < 0)
        return false;
    swr_.reset(swr);
    if (swr_init(swr_.get()) < 0) {
        swr_.reset();
        return false;
    }
    return true;
}

void AudioTrack::on_frame(const AVFrame* frame) {
    ++decoded_;
    if (frame->nb_samples <= 0 || !prepare_resampler(frame)) return;
    int64_t ts = frame->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE) ts = frame->pts;
    if (ts != AV_NOPTS_VALUE) {
        const double t = static_cast<double>(ts) * av_q2d(stream_->time_base) - offset_;
        if (t > max_duration_) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "audio at %.3f s is past the limit of %.3f s", t,
                          max_duration_);
            throw IngestError(IngestErrorKind::TooLarge, name_, buf);
        }
        if (next_t_ < 0 || std::abs(t - next_t_) > 0.5) next_t_ = std::max(0.0, t);
    } else if (next_t_ < 0) {
        next_t_ = 0;
    }
    const int64_t out_max = swr_get_out_samples(swr_.get(), frame->nb_samples);
    if (out_max <= 0 || out_max > (int64_t{1} << 24)) return;
    out_.resize(static_cast<size_t>(out_max));
    uint8_t* out[1] = {reinterpret_cast<uint8_t*>(out_.data())};
    const int got =
        swr_convert(swr_.get(), out, static_cast<int>(out_max),
                    const_cast<const uint8_t**>(frame->extended_data), frame->nb_samples);
    if (got > 0) {
        sink_(out_.data(), static_cast<size_t>(got), next_t_);
        next_t_ += static_cast<double>(got) / SpeechToText::kSampleRate;
    }
}

void AudioTrack::drain() {
    if (!swr_) return;
    const int64_t pending = swr_get_out_samples(swr_.get(), 0);
    if (pending <= 0 || pending > (int64_t{1} << 24)) return;
    out_.resize(static_cast<size_t>(pending));
    uint8_t* out[1] = {reinterpret_cast<uint8_t*>(out_.data())};
    const int got = swr_convert(swr_.get(), out, static_cast<int>(pending), nullptr, 0);
    if (got > 0 && next_t_ >= 0) {
        sink_(out_.data(), static_cast<size_t>(got), next_t_);
        next_t_ += static_cast<double>(got) / SpeechToText::kSampleRate;
    }
}

void AudioTrack::finish() {
    send(nullptr);
    drain();
}

}  // namespace sl::ingest
