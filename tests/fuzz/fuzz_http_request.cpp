// libFuzzer target for what `sightline-cli serve` reads from any local program and what a remote
// engine streams back: the HTTP request parser (core/serve/http_request.h), the chat-completion
// request JSON (core/serve/openai_api.h) and the server-sent events of a streamed answer
// (core/remote/sse.h). Any bytes give a request, an Error state with a 4xx/5xx status, or a
// FormatError; anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
//
// Input: one mode byte; bit 0 clear: the rest is fed to the HTTP parser in pieces whose sizes come
// from the mode byte (pipelined requests are followed with reset()); each complete request's body
// goes to parse_chat_completion_request. Bit 0 set: the rest is an SSE stream, fed in pieces,
// each event parsed as a chat chunk.
// Seeds: tests/fuzz/corpus/fuzz_http_request (hand-made requests and streams).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/remote/sse.h"
#include "core/serve/http_request.h"
#include "core/serve/openai_api.h"
#include "core/util/error.h"

namespace {

void check_request(const sl::HttpRequest& r) {
    if (r.path.empty() || r.path.front() != '/') std::abort();
    try {
        const sl::ChatCompletionRequest c = sl::parse_chat_completion_request(r.body);
        if (c.messages.empty()) std::abort();
        (void)sl::last_user_text(c);
    } catch (const sl::FormatError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t step = 1 + (mode >> 1) * 7;
    if ((mode & 1) == 0) {
        sl::HttpRequestParser p(64 * 1024);
        int requests = 0;
        for (size_t i = 0; i < in.size() && requests < 64; i += step) {
            p.feed(in.substr(i, step));
            while (p.state() == sl::HttpRequestParser::State::Complete && requests < 64) {
                check_request(p.request());
                ++requests;
                p.reset();
            }
            if (p.state() == sl::HttpRequestParser::State::Error) {
                const int s = p.error_status();
                if (s < 400 || s > 599 || p.error().empty()) std::abort();
                break;
            }
        }
        return 0;
    }
    sl::SseDecoder d("fuzz");
    try {
        for (size_t i = 0; i < in.size(); i += step)
            d.feed(in.substr(i, step), [](const std::string& e) {
                try {
                    (void)sl::parse_chat_chunk(e, "fuzz");
                } catch (const sl::FormatError&) {
                }
            });
    } catch (const sl::FormatError&) {
    }
    return 0;
}
