#include "ingest/video/av_raii.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <new>

extern "C" {
#include <libavutil/error.h>
#include <libavutil/log.h>
}

namespace sl::ingest::av {

namespace {

thread_local std::string t_last_line;

// Runs on whichever thread FFmpeg logs from (decoder threads included); keeps errors only.
void log_callback(void*, int level, const char* fmt, va_list args) {
    if (level > AV_LOG_ERROR || !fmt) return;
    char buf[512];
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, copy);
    va_end(copy);
    if (n <= 0) return;
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
        line.pop_back();
    if (!line.empty()) t_last_line = std::move(line);
}

}  // namespace

FramePtr make_frame() {
    FramePtr f(av_frame_alloc());
    if (!f) throw std::bad_alloc();
    return f;
}

PacketPtr make_packet() {
    PacketPtr p(av_packet_alloc());
    if (!p) throw std::bad_alloc();
    return p;
}

std::string error_text(int err) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = {};
    if (av_strerror(err, buf, sizeof buf) < 0) std::snprintf(buf, sizeof buf, "error %d", err);
    return buf;
}

void setup() {
    static std::once_flag once;
    std::call_once(once, [] {
        av_max_alloc(kMaxAllocationBytes);
        av_log_set_level(AV_LOG_ERROR);
        av_log_set_callback(log_callback);
    });
}

std::string last_log_line() {
    return t_last_line;
}

void clear_last_log_line() {
    t_last_line.clear();
}

}  // namespace sl::ingest::av
