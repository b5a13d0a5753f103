#include "ingest/video/thumbnail_encoder.h"

#include <algorithm>
#include <cmath>

extern "C" {
#include <libavutil/imgutils.h>
}

namespace sl::ingest {

bool ThumbnailEncoder::prepare(int w, int h) {
    if (enc_ && w == w_ && h == h_) return true;
    enc_.reset();
    scaled_.reset();
    const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_MJPEG);
    if (!codec) return false;
    av::CodecContextPtr enc(avcodec_alloc_context3(codec));
    if (!enc) return false;
    enc->width = w;
    enc->height = h;
    enc->pix_fmt = AV_PIX_FMT_YUVJ420P;
    enc->time_base = AVRational{1, 25};
    enc->flags |= AV_CODEC_FLAG_QSCALE;
    enc->global_quality = FF_QP2LAMBDA * 4;
    enc->thread_count = 1;
    if (avcodec_open2(enc.get(), codec, nullptr) < 0) return false;
    av::FramePtr scaled(av_frame_alloc());
    if (!scaled) return false;
    scaled->format = AV_PIX_FMT_YUVJ420P;
    scaled->width = w;
    scaled->height = h;
    if (av_frame_get_buffer(scaled.get(), 0) < 0) return false;
    if (!packet_) packet_.reset(av_packet_alloc());
    if (!packet_) return false;
    enc_ = std::move(enc);
    scaled_ = std::move(scaled);
    w_ = w;
    h_ = h;
    return true;
}

std::vector<uint8_t> ThumbnailEncoder::encode(const AVFrame* frame) {
    if (max_px_ <= 0 || frame->width <= 0 || frame->height <= 0) return {};
    double dw = frame->width, dh = frame->height;
    if (frame->sample_aspect_ratio.num > 0 && frame->sample_aspect_ratio.den > 0)
        dw *= av_q2d(frame->sample_aspect_ratio);
    const double scale = std::min(1.0, max_px_ / std::max(dw, dh));
    const int w = std::max(2, static_cast<int>(std::lround(dw * scale / 2)) * 2);
    const int h = std::max(2, static_cast<int>(std::lround(dh * scale / 2)) * 2);
    if (!prepare(w, h)) return {};
    if (av_frame_make_writable(scaled_.get()) < 0) return {};
    sws_.reset(sws_getCachedContext(sws_.release(), frame->width, frame->height,
                                    static_cast<AVPixelFormat>(frame->format), w, h,
                                    AV_PIX_FMT_YUVJ420P, SWS_BILINEAR, nullptr, nullptr, nullptr));
    if (!sws_) return {};
    if (sws_scale(sws_.get(), frame->data, frame->linesize, 0, frame->height, scaled_->data,
                  scaled_->linesize) <= 0)
        return {};
    scaled_->quality = enc_->global_quality;
    scaled_->pict_type = AV_PICTURE_TYPE_I;
    std::vector<uint8_t> out;
    if (avcodec_send_frame(enc_.get(), scaled_.get()) < 0) return {};
    while (true) {
        const int r = avcodec_receive_packet(enc_.get(), packet_.get());
        if (r < 0) break;  // EAGAIN: needs the next frame; the JPEG of this one came out already
        out.assign(packet_->data, packet_->data + packet_->size);
        av_packet_unref(packet_.get());
    }
    return out;
}

}  // namespace sl::ingest
