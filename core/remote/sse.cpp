#include "core/remote/sse.h"

#include "core/embed/json.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace sl {

void SseDecoder::feed(std::string_view bytes, const std::function<void(const std::string&)>& on_data) {
    for (char ch : bytes) {
        if (after_cr_) {
            after_cr_ = false;
            if (ch == '\n') continue;  // CRLF: the line ended at CR
        }
        if (ch == '\r' || ch == '\n') {
            after_cr_ = ch == '\r';
            const std::string l = std::move(pending_);
            pending_.clear();
            line(l, on_data);
            continue;
        }
        if (pending_.size() + data_.size() >= kMaxEvent)
            throw FormatError(origin_ + ": an event of the stream is larger than " + std::to_string(kMaxEvent >> 20) + " MiB");
        pending_.push_back(ch);
    }
}

void SseDecoder::line(std::string_view l, const std::function<void(const std::string&)>& on_data) {
    if (l.empty()) {  // the event ends
        if (has_data_) {
            std::string d = std::move(data_);
            data_.clear();
            has_data_ = false;
            on_data(d);
        }
        return;
    }
    if (l.front() == ':') return;  // a comment (keep-alive)
    const size_t colon = l.find(':');
    const std::string_view field = l.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field != "data") return;
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
}

namespace {

std::string member_text(const JsonValue* v) { return v && v->is_string() ? v->text() : std::string(); }

int64_t member_int(const JsonValue* v) {
    if (!v || !v->is_number()) return -1;
    const auto u = v->as_u64();
    return u && *u < (uint64_t{1} << 62) ? static_cast<int64_t>(*u) : -1;
}

// A JSON value written back as text (for the "sightline" member, read again by the caller).
void write_value(JsonWriter& w, const JsonValue& v) {
    switch (v.type()) {
    case JsonValue::Type::Null: w.null(); break;
    case JsonValue::Type::Bool: w.value(v.as_bool()); break;
    case JsonValue::Type::Number: {
        const auto u = v.as_u64();
        if (u && *u < (uint64_t{1} << 62)) w.value(static_cast<int64_t>(*u));
        else w.value(v.as_double());
        break;
    }
    case JsonValue::Type::String: w.value(v.text()); break;
    case JsonValue::Type::Array:
        w.begin_array();
        for (const auto& i : v.items()) write_value(w, i);
        w.end_array();
        break;
    case JsonValue::Type::Object:
        w.begin_object();
        for (const auto& [k, m] : v.members()) {
            w.key(k);
            write_value(w, m);
        }
        w.end_object();
        break;
    }
}

}  // namespace

ChatChunk parse_chat_chunk(const std::string& data, const std::string& origin) {
    ChatChunk c;
    if (data == "[DONE]") {
        c.done = true;
        return c;
    }
    const JsonValue v = JsonValue::parse(data, origin);
    if (!v.is_object()) throw FormatError(origin + ": a streamed chunk is not a JSON object");
    if (const JsonValue* e = v.find("error")) {
        c.error = e->is_object() ? member_text(e->find("message")) : member_text(e);
        if (c.error.empty()) c.error = "the server sent an error";
        return c;
    }
    if (const JsonValue* choices = v.find("choices"); choices && choices->is_array() && !choices->items().empty()) {
        const JsonValue& ch = choices->items().front();
        if (!ch.is_object()) throw FormatError(origin + ": a chunk's choice is not an object");
        const JsonValue* delta = ch.find("delta");
        if (!delta) delta = ch.find("message");  // a server that answers a stream with whole messages
        if (delta && delta->is_object()) {
            c.content = member_text(delta->find("content"));
            c.reasoning = member_text(delta->find("reasoning_content"));
            if (c.reasoning.empty()) c.reasoning = member_text(delta->find("reasoning"));
        }
        if (const JsonValue* f = ch.find("finish_reason"); f && f->is_string()) c.finish_reason = f->text();
        if (const JsonValue* lp = ch.find("logprobs"); lp && lp->is_object())
            if (const JsonValue* content = lp->find("content"); content && content->is_array())
                for (const auto& t : content->items())
                    if (const JsonValue* p = t.find("logprob"); p && p->is_number()) c.logprobs.push_back(p->as_double());
    }
    if (const JsonValue* u = v.find("usage"); u && u->is_object()) {
        c.prompt_tokens = member_int(u->find("prompt_tokens"));
        c.completion_tokens = member_int(u->find("completion_tokens"));
    }
    if (const JsonValue* s = v.find("sightline")) {
        JsonWriter w;
        write_value(w, *s);
        c.extra = w.str();
    }
    return c;
}

std::string error_message_of(std::string_view body) {
    try {
        const JsonValue v = JsonValue::parse(body, "body");
        if (v.is_object()) {
            if (const JsonValue* e = v.find("error")) {
                if (e->is_string()) return e->text();
                if (e->is_object())
                    if (const JsonValue* m = e->find("message"); m && m->is_string()) return m->text();
            }
            if (const JsonValue* d = v.find("detail"); d && d->is_string()) return d->text();
            if (const JsonValue* m = v.find("message"); m && m->is_string()) return m->text();
        }
    } catch (const Error&) {
    }
    std::string s(body.substr(0, 300));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
}

}  // namespace sl
