#include "core/serve/http_request.h"

#include <algorithm>
#include <cctype>

namespace sl {

namespace {

std::string lower(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// RFC 9110 token characters (method and header names).
bool is_tchar(char c) {
    if (std::isalnum(static_cast<unsigned char>(c))) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool all_tchar(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// Header values: visible ASCII, obs-text, space and tab; no other control characters.
bool valid_value(std::string_view s) {
    return std::none_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\t') || u == 0x7f;
    });
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return std::string_view(v);
    return std::nullopt;
}

bool HttpRequest::keep_alive() const {
    const auto c = header("connection");
    const std::string v = c ? lower(*c) : std::string();
    if (minor_version >= 1) return v.find("close") == std::string::npos;
    return v.find("keep-alive") != std::string::npos;
}

HttpRequestParser::State HttpRequestParser::fail(int status, std::string what) {
    state_ = State::Error;
    error_status_ = status;
    error_ = std::move(what);
    return state_;
}

HttpRequestParser::State HttpRequestParser::feed(std::string_view bytes) {
    buf_.append(bytes);
    if (state_ != State::Incomplete) return state_;
    if (!head_done_) {
        // Empty lines before a request line are allowed (RFC 9112 2.2).
        size_t skip = 0;
        while (skip < buf_.size() && (buf_[skip] == '\r' || buf_[skip] == '\n')) ++skip;
        if (skip > 0) buf_.erase(0, skip);
        const size_t end = buf_.find("\r\n\r\n");
        const size_t end_lf = buf_.find("\n\n");
        size_t head_end = std::string::npos, body = 0;
        if (end != std::string::npos && (end_lf == std::string::npos || end <= end_lf)) head_end = end, body = end + 4;
        else if (end_lf != std::string::npos) head_end = end_lf, body = end_lf + 2;
        if (head_end == std::string::npos) {
            if (buf_.size() > kMaxHeaderBytes) return fail(431, "the request's headers are larger than 16 KiB");
            return state_;
        }
        if (head_end > kMaxHeaderBytes) return fail(431, "the request's headers are larger than 16 KiB");
        if (parse_head(head_end) == State::Error) return state_;
        head_done_ = true;
        body_start_ = body;
    }
    if (buf_.size() - body_start_ < content_length_) return state_;
    request_.body = buf_.substr(body_start_, content_length_);
    state_ = State::Complete;
    return state_;
}

HttpRequestParser::State HttpRequestParser::parse_head(size_t head_end) {
    std::string_view head(buf_.data(), head_end);
    std::vector<std::string_view> lines;
    while (!head.empty()) {
        const size_t nl = head.find('\n');
        std::string_view l = head.substr(0, nl);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        lines.push_back(l);
        if (nl == std::string_view::npos) break;
        head.remove_prefix(nl + 1);
    }
    if (lines.empty()) return fail(400, "an empty request");
    // The request line: METHOD SP TARGET SP HTTP/1.x
    const std::string_view rl = lines[0];
    const size_t sp1 = rl.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != std::string_view::npos)
        return fail(400, "a malformed request line");
    const std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1),
                           version = rl.substr(sp2 + 1);
    if (!all_tchar(method)) return fail(400, "a malformed method");
    if (target.empty() || target.front() != '/' || !valid_value(target) || target.find(' ') != std::string_view::npos)
        return fail(400, "a malformed request target");
    if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || !std::isdigit(static_cast<unsigned char>(version[7])))
        return fail(version.substr(0, 5) == "HTTP/" ? 505 : 400, "an unsupported protocol version");
    request_.method = std::string(method);
    const size_t q = target.find('?');
    request_.path = std::string(target.substr(0, q));
    request_.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
    request_.minor_version = version[7] - '0';
    // Headers.
    if (lines.size() - 1 > kMaxHeaders) return fail(431, "more than 64 request headers");
    for (size_t i = 1; i < lines.size(); ++i) {
        const std::string_view l = lines[i];
        if (!l.empty() && (l.front() == ' ' || l.front() == '\t')) return fail(400, "a folded header line");
        const size_t colon = l.find(':');
        if (colon == std::string_view::npos) return fail(400, "a header line without a colon");
        const std::string_view name = l.substr(0, colon), value = trim(l.substr(colon + 1));
        if (!all_tchar(name)) return fail(400, "a malformed header name");
        if (!valid_value(value)) return fail(400, "a control character in a header value");
        request_.headers.emplace_back(lower(name), std::string(value));
    }
    if (request_.header("transfer-encoding")) return fail(501, "Transfer-Encoding in requests is not supported; send Content-Length");
    std::optional<std::string_view> cl;
    for (const auto& [k, v] : request_.headers) {
        if (k != "content-length") continue;
        if (cl && *cl != v) return fail(400, "conflicting Content-Length headers");
        cl = v;
    }
    content_length_ = 0;
    if (cl) {
        if (cl->empty() || cl->size() > 12 || !std::all_of(cl->begin(), cl->end(), [](char c) { return c >= '0' && c <= '9'; }))
            return fail(400, "a malformed Content-Length");
        content_length_ = std::stoull(std::string(*cl));
        if (content_length_ > max_body_)
            return fail(413, "the request body is larger than " + std::to_string(max_body_ >> 20) + " MiB");
    } else if (request_.method == "POST" || request_.method == "PUT") {
        return fail(411, "a request body needs Content-Length");
    }
    return state_;
}

void HttpRequestParser::reset() {
    if (state_ == State::Complete) buf_.erase(0, std::min(buf_.size(), body_start_ + content_length_));
    else buf_.clear();
    body_start_ = 0;
    content_length_ = 0;
    head_done_ = false;
    state_ = State::Incomplete;
    request_ = HttpRequest{};
    error_status_ = 0;
    error_.clear();
    if (!buf_.empty()) feed({});
}

const char* http_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

}  // namespace sl
