#include "ingest/video/media_input.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "ingest/ingest_error.h"

namespace sl::ingest {

struct MediaInput::MemorySource {
    const uint8_t* data = nullptr;
    int64_t size = 0;
    int64_t pos = 0;

    // AVIOContext callbacks; run on the thread that reads the MediaInput.
    static int read(void* opaque, uint8_t* buf, int n) {
        auto* s = static_cast<MemorySource*>(opaque);
        if (n <= 0) return 0;
        if (s->pos >= s->size) return AVERROR_EOF;
        const int64_t take = std::min<int64_t>(n, s->size - s->pos);
        std::memcpy(buf, s->data + s->pos, static_cast<size_t>(take));
        s->pos += take;
        return static_cast<int>(take);
    }
    static int64_t seek(void* opaque, int64_t offset, int whence) {
        auto* s = static_cast<MemorySource*>(opaque);
        whence &= ~AVSEEK_FORCE;
        if (whence == AVSEEK_SIZE) return s->size;
        int64_t base = 0;
        if (whence == SEEK_CUR)
            base = s->pos;
        else if (whence == SEEK_END)
            base = s->size;
        else if (whence != SEEK_SET)
            return AVERROR(EINVAL);
        if (offset > INT64_MAX / 2 || offset < -(INT64_MAX / 2)) return AVERROR(EINVAL);
        const int64_t to = base + offset;
        if (to < 0 || to > s->size) return AVERROR(EINVAL);
        s->pos = to;
        return to;
    }
};

namespace {

int interrupt_cb(void* opaque) {
    return static_cast<const IngestContext*>(opaque)->cancelled() ? 1 : 0;
}

}  // namespace

// Nested opens (HLS segments, concat lists, image sequences, external references) are refused: a
// media file is read on its own, never as a pointer to other files or URLs. The first refused URL
// is kept for the message (s->opaque is the MediaInput).
int MediaInput::refuse_io_open(AVFormatContext* s, AVIOContext**, const char* url, int, AVDictionary**) {
    auto* self = static_cast<MediaInput*>(s->opaque);
    if (self && self->refused_url_.empty() && url) self->refused_url_ = url;
    return AVERROR(EPERM);
}

namespace {

std::string cause(int err) {
    std::string line = av::last_log_line();
    std::string text = av::error_text(err);
    return line.empty() || line == text ? text : text + " (" + line + ")";
}

}  // namespace

MediaInput::~MediaInput() {
    fmt_.reset();
    if (file_io_) avio_closep(&file_io_);
}

void MediaInput::check_dimensions(const std::string& name, int stream_index, int width, int height,
                                  int max_dimension) {
    if (width > max_dimension || height > max_dimension || width < 0 || height < 0) {
        throw IngestError(IngestErrorKind::TooLarge, name,
                          "video stream " + std::to_string(stream_index) + " is " +
                              std::to_string(width) + "x" + std::to_string(height) +
                              " pixels, over the limit of " + std::to_string(max_dimension));
    }
}

std::unique_ptr<MediaInput> MediaInput::open_file(const std::string& path,
                                                  const IngestContext& ctx) {
    av::setup();
    av::clear_last_log_line();
    std::unique_ptr<MediaInput> in(new MediaInput);
    in->name_ = path;
    AVIOInterruptCB cb{interrupt_cb, const_cast<IngestContext*>(&ctx)};
    const int err =
        avio_open2(&in->file_io_, ("file:" + path).c_str(), AVIO_FLAG_READ, &cb, nullptr);
    if (err < 0) {
        if (ctx.cancelled()) ctx.check_cancelled(path);
        throw IngestError(IngestErrorKind::Io, path, "cannot open: " + av::error_text(err));
    }
    in->open(path, ctx);
    return in;
}

std::unique_ptr<MediaInput> MediaInput::open_memory(std::span<const uint8_t> bytes,
                                                    const std::string& name,
                                                    const IngestContext& ctx) {
    av::setup();
    av::clear_last_log_line();
    std::unique_ptr<MediaInput> in(new MediaInput);
    in->name_ = name;
    in->memory_ = std::make_unique<MemorySource>();
    in->memory_->data = bytes.data();
    in->memory_->size = static_cast<int64_t>(bytes.size());
    constexpr int kBufferSize = 32 * 1024;
    auto* buffer = static_cast<uint8_t*>(av_malloc(kBufferSize));
    if (!buffer) throw std::bad_alloc();
    in->custom_io_.reset(avio_alloc_context(buffer, kBufferSize, 0, in->memory_.get(),
                                            &MemorySource::read, nullptr, &MemorySource::seek));
    if (!in->custom_io_) {
        av_free(buffer);
        throw std::bad_alloc();
    }
    in->open(name, ctx);
    return in;
}

void MediaInput::open(const std::string& url, const IngestContext& ctx) {
    AVIOContext* pb = file_io_ ? file_io_ : custom_io_.get();
    if (avio_size(pb) == 0) throw IngestError(IngestErrorKind::Corrupt, name_, "the file is empty");
    const AVInputFormat* ifmt = nullptr;
    int err = av_probe_input_buffer2(pb, &ifmt, url.c_str(), nullptr, 0, 0);
    if (err < 0 || !ifmt) {
        ctx.check_cancelled(name_);
        throw IngestError(
            IngestErrorKind::Unsupported, name_,
            "not a media file FFmpeg can read: " + cause(err < 0 ? err : AVERROR_INVALIDDATA));
    }
    const std::string what = ifmt->long_name ? ifmt->long_name : ifmt->name;
    // FFmpeg takes its best guess even when it is weak (random bytes read as LRC lyrics at a
    // score of 5 of 100). A weak guess stands only when the file's name agrees with it.
    constexpr int kMinProbeScore = AVPROBE_SCORE_RETRY;
    if (err < kMinProbeScore && !(ifmt->extensions && av_match_ext(url.c_str(), ifmt->extensions)))
        throw IngestError(IngestErrorKind::Unsupported, name_,
                          "not a media file FFmpeg can read (its best guess, " + what +
                              ", is a weak match of " + std::to_string(err) + " in 100)");
    AVFormatContext* raw = avformat_alloc_context();
    if (!raw) throw std::bad_alloc();
    raw->pb = pb;
    raw->flags |= AVFMT_FLAG_CUSTOM_IO;
    raw->interrupt_callback = {interrupt_cb, const_cast<IngestContext*>(&ctx)};
    raw->io_open = &MediaInput::refuse_io_open;
    raw->opaque = this;
    AVDictionary* opts = nullptr;
    av_dict_set(&opts, "protocol_whitelist", "file", 0);
    err = avformat_open_input(&raw, url.c_str(), ifmt, &opts);  // frees raw on failure
    av_dict_free(&opts);
    if (err < 0) {
        ctx.check_cancelled(name_);
        if (!refused_url_.empty() || err == AVERROR(EPERM)) {
            std::string other = refused_url_.size() > 200 ? refused_url_.substr(0, 200) + "…" : refused_url_;
            throw IngestError(IngestErrorKind::Unsupported, name_,
                              "the " + what + " refers to other files" +
                                  (other.empty() ? std::string() : " ('" + other + "')") +
                                  ", which are not read: add the media file itself");
        }
        if (err == AVERROR(ENOMEM))
            throw IngestError(IngestErrorKind::TooLarge, name_,
                              "the " + what + " asks for more memory than a media file may take (" +
                                  std::to_string(av::kMaxAllocationBytes >> 20) +
                                  " MiB at once): damaged or hostile");
        throw IngestError(IngestErrorKind::Corrupt, name_,
                          "the " + what + " is damaged or truncated: " + cause(err));
    }
    fmt_.reset(raw);

    const IngestOptions& o = ctx.options();
    auto check_streams = [&] {
        for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
            const AVCodecParameters* par = fmt_->streams[i]->codecpar;
            if (par->codec_type == AVMEDIA_TYPE_VIDEO)
                check_dimensions(name_, static_cast<int>(i), par->width, par->height,
                                 o.max_video_dimension);
        }
    };
    check_streams();  // before any decoder opens (find_stream_info decodes a few frames)

    // Per-stream options for the decoders find_stream_info opens: never more pixels than allowed.
    const int64_t max_px = std::min<int64_t>(
        INT32_MAX, static_cast<int64_t>(o.max_video_dimension) * o.max_video_dimension);
    std::vector<AVDictionary*> stream_opts(fmt_->nb_streams, nullptr);
    for (auto& d : stream_opts) {
        av_dict_set_int(&d, "max_pixels", max_px, 0);
        av_dict_set_int(&d, "threads", 1, 0);
    }
    err = avformat_find_stream_info(fmt_.get(), stream_opts.empty() ? nullptr : stream_opts.data());
    for (auto& d : stream_opts) av_dict_free(&d);
    ctx.check_cancelled(name_);
    if (err < 0 && fmt_->nb_streams == 0)
        throw IngestError(IngestErrorKind::Corrupt, name_,
                          "cannot read the streams: " + cause(err));
    check_streams();
    bool any = false;
    for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
        const AVMediaType t = fmt_->streams[i]->codecpar->codec_type;
        any =
            any || t == AVMEDIA_TYPE_VIDEO || t == AVMEDIA_TYPE_AUDIO || t == AVMEDIA_TYPE_SUBTITLE;
    }
    if (!any)
        throw IngestError(IngestErrorKind::Unsupported, name_,
                          "the file has no audio, video or subtitle streams");

    if (fmt_->start_time != AV_NOPTS_VALUE && fmt_->start_time > 0)
        start_offset_ = static_cast<double>(fmt_->start_time) / AV_TIME_BASE;
    if (fmt_->duration != AV_NOPTS_VALUE && fmt_->duration > 0)
        duration_ = static_cast<double>(fmt_->duration) / AV_TIME_BASE;
    if (duration_ > o.max_duration_s)
        throw IngestError(IngestErrorKind::TooLarge, name_,
                          "the media claims a duration of " + std::to_string(duration_) +
                              " s, over the limit of " + std::to_string(o.max_duration_s) + " s");
}

}  // namespace sl::ingest
