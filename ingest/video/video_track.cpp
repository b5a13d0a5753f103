#include "ingest/video/video_track.h"

#include <algorithm>
#include <cstdio>

#include "ingest/ingest_error.h"

namespace sl::ingest {

namespace {

std::string seconds_text(double t) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", t);
    return buf;
}

}  // namespace

VideoTrack::VideoTrack(const std::string& name, AVStream* stream, const VideoTrackConfig& config)
    : name_(name),
      stream_(stream),
      config_(config),
      frame_(av::make_frame()),
      pending_(av::make_frame()),
      small_(static_cast<size_t>(FrameSampler::kSmallW * FrameSampler::kSmallH)),
      sampler_(SamplerConfig{config.max_frames_per_minute, config.duration, 0.12}),
      thumbs_(config.thumbnail_px) {
    const AVCodecParameters* par = stream->codecpar;
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        throw IngestError(
            IngestErrorKind::Unsupported, name,
            std::string("no decoder for the video codec ") + avcodec_get_name(par->codec_id));
    dec_.reset(avcodec_alloc_context3(codec));
    if (!dec_) throw std::bad_alloc();
    int err = avcodec_parameters_to_context(dec_.get(), par);
    if (err >= 0) {
        dec_->pkt_timebase = stream->time_base;
        dec_->thread_count = std::max(1, config.threads);
        dec_->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
        dec_->max_pixels = std::min<int64_t>(
            INT32_MAX, static_cast<int64_t>(config.max_dimension) * config.max_dimension);
        dec_->skip_frame = AVDISCARD_NONREF;
        err = avcodec_open2(dec_.get(), codec, nullptr);
    }
    if (err < 0)
        throw IngestError(IngestErrorKind::Corrupt, name,
                          std::string("cannot open the ") + codec->name +
                              " video decoder: " + av::error_text(err));
    tb_ = av_q2d(stream->time_base);
    const AVRational fr =
        stream->avg_frame_rate.num > 0 ? stream->avg_frame_rate : stream->r_frame_rate;
    if (fr.num > 0 && fr.den > 0) frame_dur_ = std::clamp(av_q2d(av_inv_q(fr)), 1e-4, 10.0);
    index_gop_ = estimate_gop_from_index();
}

double VideoTrack::estimate_gop_from_index() const {
    const int n = std::min(avformat_index_get_entries_count(stream_), 1 << 20);
    double prev = -1, max_gap = 0;
    int keys = 0;
    for (int i = 0; i < n; ++i) {
        const AVIndexEntry* e = avformat_index_get_entry(stream_, i);
        if (!e || !(e->flags & AVINDEX_KEYFRAME) || e->timestamp == AV_NOPTS_VALUE) continue;
        const double t = static_cast<double>(e->timestamp) * tb_;
        if (prev >= 0) max_gap = std::max(max_gap, t - prev);
        prev = t;
        ++keys;
    }
    return keys >= 2 ? max_gap : 0;
}

void VideoTrack::on_packet(const AVPacket* packet) {
    const int64_t ts = packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts;
    if (packet->flags & AV_PKT_FLAG_KEY) {
        const double t = ts != AV_NOPTS_VALUE ? static_cast<double>(ts) * tb_ : -1;
        if (t >= 0 && last_key_t_ >= 0 && t > last_key_t_) observed_gop_ = t - last_key_t_;
        if (t >= 0) last_key_t_ = t;
        // Decide for the GOP this keyframe opens: the keyframe alone, or every reference frame.
        const double gop = index_gop_ > 0 ? index_gop_ : observed_gop_;
        key_only_ = gop > 0 && gop <= sampler_.slot_length();
        dec_->skip_frame = key_only_ ? AVDISCARD_NONKEY : AVDISCARD_NONREF;
        if (key_only_) {
            // Intra-only streams: analyse a few keyframes a second at most.
            const double spacing = std::min(1.0, sampler_.slot_length() / 4);
            if (t >= 0 && t < last_sent_key_t_ + spacing) return;
            if (t >= 0) last_sent_key_t_ = t;
        }
    } else if (key_only_) {
        return;
    }
    send(packet);
}

void VideoTrack::send(const AVPacket* packet) {
    int err = avcodec_send_packet(dec_.get(), packet);
    if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF) ++corrupt_;
    while (true) {
        const int r = avcodec_receive_frame(dec_.get(), frame_.get());
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) break;
        if (r < 0) {
            ++corrupt_;  // a damaged frame: skip it and go on with the next packet
            break;
        }
        if (frame_->decode_error_flags || (frame_->flags & AV_FRAME_FLAG_CORRUPT)) ++corrupt_;
        on_frame(frame_.get());
        av_frame_unref(frame_.get());
    }
    if (err == AVERROR(EAGAIN)) {  // the decoder was full; it has room again after draining
        err = avcodec_send_packet(dec_.get(), packet);
        if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF) ++corrupt_;
    }
}

void VideoTrack::on_frame(AVFrame* frame) {
    int64_t ts = frame->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE) ts = frame->pts;
    double t = ts != AV_NOPTS_VALUE ? static_cast<double>(ts) * tb_ - config_.start_offset
                                    : (last_t_ < 0 ? 0 : last_t_ + frame_dur_);
    if (!(t >= 0) || !(t > last_t_)) return;  // pre-roll, or out of order: keep times increasing
    if (t > config_.max_duration_s)
        throw IngestError(IngestErrorKind::TooLarge, name_,
                          "a video frame at " + seconds_text(t) + " s is past the limit of " +
                              seconds_text(config_.max_duration_s) + " s");
    last_t_ = t;
    ++decoded_;
    if (frame->width <= 0 || frame->height <= 0 || frame->width > config_.max_dimension ||
        frame->height > config_.max_dimension || !small_gray(frame))
        return;
    const FrameSampler::Decision d = sampler_.offer(t, small_);
    if (d.emit_pending) emit_pending();
    if (d.take) {
        av_frame_unref(pending_.get());
        av_frame_move_ref(pending_.get(), frame);
        pending_t_ = t;
    }
}

bool VideoTrack::small_gray(const AVFrame* frame) {
    small_sws_.reset(sws_getCachedContext(small_sws_.release(), frame->width, frame->height,
                                          static_cast<AVPixelFormat>(frame->format),
                                          FrameSampler::kSmallW, FrameSampler::kSmallH,
                                          AV_PIX_FMT_GRAY8, SWS_AREA, nullptr, nullptr, nullptr));
    if (!small_sws_) return false;
    uint8_t* dst[4] = {small_.data(), nullptr, nullptr, nullptr};
    int dst_stride[4] = {FrameSampler::kSmallW, 0, 0, 0};
    return sws_scale(small_sws_.get(), frame->data, frame->linesize, 0, frame->height, dst,
                     dst_stride) > 0;
}

void VideoTrack::emit_pending() {
    if (!pending_->buf[0] && !pending_->data[0]) return;
    doc::Visual v;
    v.kind = doc::VisualKind::Frame;
    v.timestamp = pending_t_;
    v.width = pending_->width;
    v.height = pending_->height;
    v.locator = "frame:t=" + seconds_text(pending_t_);
    if (config_.thumbnail_px > 0) {
        v.encoded = thumbs_.encode(pending_.get());
        if (!v.encoded.empty()) v.mime = "image/jpeg";
    }
    frames_.push_back(std::move(v));
    av_frame_unref(pending_.get());
}

void VideoTrack::finish() {
    send(nullptr);  // flush: the decoder returns the frames it still holds, then EOF
    if (sampler_.finish()) emit_pending();
}

}  // namespace sl::ingest
