#include "ingest/video/subtitle_track.h"

#include <algorithm>

#include "ingest/video/subtitles.h"

namespace sl::ingest {

SubtitleTrack::SubtitleTrack(AVStream* stream, double start_offset)
    : stream_(stream), offset_(start_offset) {
    const AVCodecParameters* par = stream->codecpar;
    const AVCodecDescriptor* desc = avcodec_descriptor_get(par->codec_id);
    if (!desc || !(desc->props & AV_CODEC_PROP_TEXT_SUB)) return;
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (!codec) return;
    av::CodecContextPtr dec(avcodec_alloc_context3(codec));
    if (!dec || avcodec_parameters_to_context(dec.get(), par) < 0) return;
    dec->pkt_timebase = stream->time_base;
    if (avcodec_open2(dec.get(), codec, nullptr) < 0) return;
    dec_ = std::move(dec);
}

std::string SubtitleTrack::codec_name() const {
    return avcodec_get_name(stream_->codecpar->codec_id);
}

void SubtitleTrack::on_packet(const AVPacket* packet) {
    if (!dec_ || packet->pts == AV_NOPTS_VALUE) return;
    av::Subtitle sub;
    int got = 0;
    // decode_subtitle2 takes a non-const packet but does not modify it.
    const int err =
        avcodec_decode_subtitle2(dec_.get(), sub.get(), &got, const_cast<AVPacket*>(packet));
    if (err < 0) {
        ++corrupt_;
        return;
    }
    if (!got) return;
    const double tb = av_q2d(stream_->time_base);
    const double base = static_cast<double>(packet->pts) * tb - offset_;
    const double t0 = base + sub->start_display_time / 1000.0;
    double t1 = 0;
    if (sub->end_display_time > sub->start_display_time && sub->end_display_time != UINT32_MAX)
        t1 = base + sub->end_display_time / 1000.0;
    else if (packet->duration > 0)
        t1 = base + static_cast<double>(packet->duration) * tb;
    else
        t1 = t0 + 3.0;  // open-ended cue: a reading time
    std::string text;
    for (unsigned i = 0; i < sub->num_rects; ++i) {
        const AVSubtitleRect* r = sub->rects[i];
        std::string part;
        if (r->type == SUBTITLE_ASS && r->ass)
            part = ass_event_text(r->ass);
        else if (r->type == SUBTITLE_TEXT && r->text)
            part = strip_markup(r->text);
        else if (r->type == SUBTITLE_BITMAP)
            ++bitmaps_;
        if (part.empty()) continue;
        if (!text.empty()) text += '\n';
        text += part;
    }
    if (text.empty() || !(t0 >= 0)) return;
    doc::Block b;
    b.role = doc::BlockRole::Subtitle;
    b.text = std::move(text);
    b.time = doc::TimeRange{t0, std::max(t0, t1)};
    blocks_.push_back(std::move(b));
}

}  // namespace sl::ingest
