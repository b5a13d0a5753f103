// HTTP/1.1 requests as `sightline-cli serve` reads them from a socket: an incremental parser with
// hard limits, for bytes from any local program (untrusted: tests/fuzz/fuzz_http_request.cpp).
//
//   HttpRequestParser p;
//   while (p.state() == HttpRequestParser::State::Incomplete) p.feed(read_some());
//   if (p.state() == HttpRequestParser::State::Error) reply(p.error_status(), p.error());
//   else handle(p.request());   // then p.reset() for the next request on a kept-alive connection
//
// Accepted: a request line "METHOD TARGET HTTP/1.x", header lines (at most kMaxHeaderBytes in all,
// kMaxHeaders of them), a body of Content-Length bytes (at most max_body). Refused, with the
// status to answer: a malformed request line or header (400), an unknown version (505), a body
// without Content-Length on POST/PUT (411), Transfer-Encoding (501: no chunked request bodies),
// headers or body over the limits (431 / 413). Bytes after the request stay buffered for the next.
// Not thread-safe; one parser per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sl {

struct HttpRequest {
    std::string method;  // "GET", "POST", ... as sent
    std::string path;    // the target without its query ("/v1/models")
    std::string query;   // after '?', undecoded
    int minor_version = 1;
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
    std::string body;
    // The first header named `name` (lower case), or nullopt.
    std::optional<std::string_view> header(std::string_view name) const;
    // HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive".
    bool keep_alive() const;
};

class HttpRequestParser {
public:
    static constexpr size_t kMaxHeaderBytes = 16 * 1024;
    static constexpr size_t kMaxHeaders = 64;
    enum class State { Incomplete, Complete, Error };

    explicit HttpRequestParser(size_t max_body = size_t{8} << 20) : max_body_(max_body) {}
    // Appends bytes and parses as far as they go. Feeding after Complete or Error only buffers.
    State feed(std::string_view bytes);
    State state() const { return state_; }
    const HttpRequest& request() const { return request_; }
    int error_status() const { return error_status_; }
    const std::string& error() const { return error_; }
    // Starts the next request with the bytes left over after the completed one.
    void reset();

private:
    State fail(int status, std::string what);
    State parse_head(size_t head_end);
    std::string buf_;
    size_t max_body_;
    size_t body_start_ = 0;
    size_t content_length_ = 0;
    bool head_done_ = false;
    State state_ = State::Incomplete;
    HttpRequest request_;
    int error_status_ = 0;
    std::string error_;
};

// The reason phrase of a status ("Too Many Requests"), "" for codes it does not know.
const char* http_reason(int status);

}  // namespace sl
