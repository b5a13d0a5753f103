#include "core/serve/openai_api.h"

#include "core/embed/json.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace sl {

namespace {

constexpr const char* kOrigin = "the request";

std::string content_text(const JsonValue& c, size_t i) {
    if (c.is_string()) return c.text();
    if (c.type() == JsonValue::Type::Null) return {};
    if (!c.is_array()) throw FormatError(std::string(kOrigin) + ": messages[" + std::to_string(i) + "].content is neither text nor a list of parts");
    std::string text;
    for (const auto& part : c.items()) {
        if (!part.is_object()) continue;
        const JsonValue* type = part.find("type");
        const JsonValue* t = part.find("text");
        if (type && type->is_string() && type->text() == "text" && t && t->is_string()) {
            if (!text.empty()) text += "\n";
            text += t->text();
        }
    }
    return text;
}

void write_usage(JsonWriter& w, const CompletionUsage& u) {
    w.key("usage");
    w.begin_object();
    w.key("prompt_tokens"), w.value(u.prompt_tokens);
    w.key("completion_tokens"), w.value(u.completion_tokens);
    w.key("total_tokens"), w.value(u.prompt_tokens + u.completion_tokens);
    w.end_object();
}

// `extra` is JSON text we wrote ourselves: spliced in as the value of "sightline".
std::string with_extra(std::string json, std::string_view extra) {
    if (extra.empty()) return json;
    json.pop_back();  // the closing brace
    json += ",\"sightline\":";
    json += extra;
    json += "}";
    return json;
}

}  // namespace

ChatCompletionRequest parse_chat_completion_request(std::string_view body) {
    const JsonValue v = JsonValue::parse(body, kOrigin);
    if (!v.is_object()) throw FormatError(std::string(kOrigin) + ": the body is not a JSON object");
    ChatCompletionRequest r;
    if (const JsonValue* m = v.find("model"); m && m->is_string()) r.model = m->text();
    const JsonValue* msgs = v.find("messages");
    if (!msgs || !msgs->is_array() || msgs->items().empty())
        throw FormatError(std::string(kOrigin) + ": messages is missing or empty");
    if (msgs->items().size() > 1024) throw FormatError(std::string(kOrigin) + ": more than 1024 messages");
    for (size_t i = 0; i < msgs->items().size(); ++i) {
        const JsonValue& m = msgs->items()[i];
        const JsonValue* role = m.find("role");
        if (!m.is_object() || !role || !role->is_string())
            throw FormatError(std::string(kOrigin) + ": messages[" + std::to_string(i) + "] has no role");
        std::string rl = role->text();
        if (rl == "developer") rl = "system";
        if (rl != "system" && rl != "user" && rl != "assistant")
            throw FormatError(std::string(kOrigin) + ": messages[" + std::to_string(i) + "].role '" + rl.substr(0, 40) +
                              "' is not system, user or assistant");
        const JsonValue* c = m.find("content");
        r.messages.push_back({rl, c ? content_text(*c, i) : std::string()});
    }
    if (const JsonValue* s = v.find("stream"); s && s->type() == JsonValue::Type::Bool) r.stream = s->as_bool();
    if (const JsonValue* so = v.find("stream_options"); so && so->is_object())
        if (const JsonValue* u = so->find("include_usage"); u && u->type() == JsonValue::Type::Bool) r.include_usage = u->as_bool();
    for (const char* k : {"max_completion_tokens", "max_tokens"}) {
        const JsonValue* t = v.find(k);
        if (!t || t->type() == JsonValue::Type::Null) continue;
        const auto n = t->is_number() ? t->as_u64() : std::nullopt;
        if (!n || *n < 1 || *n > 1'000'000) throw FormatError(std::string(kOrigin) + ": " + k + " is not a count of tokens from 1 to 1000000");
        r.max_tokens = static_cast<int>(*n);
        break;
    }
    if (const JsonValue* t = v.find("temperature"); t && t->is_number()) {
        r.temperature = t->as_double();
        if (!(r.temperature >= 0 && r.temperature <= 2)) throw FormatError(std::string(kOrigin) + ": temperature is not from 0 to 2");
    }
    if (const JsonValue* e = v.find("effort"); e && e->is_string()) {
        if (e->text() != "low" && e->text() != "medium" && e->text() != "high")
            throw FormatError(std::string(kOrigin) + ": effort is not low, medium or high");
        r.effort = e->text();
    }
    return r;
}

std::string last_user_text(const ChatCompletionRequest& r) {
    for (auto it = r.messages.rbegin(); it != r.messages.rend(); ++it)
        if (it->role == "user") return it->content;
    return {};
}

std::string models_json(const std::vector<ModelCard>& models, int64_t created) {
    JsonWriter w;
    w.begin_object();
    w.key("object"), w.value("list");
    w.key("data");
    w.begin_array();
    for (const auto& m : models) {
        w.begin_object();
        w.key("id"), w.value(m.id);
        w.key("object"), w.value("model");
        w.key("created"), w.value(created);
        w.key("owned_by"), w.value(m.owned_by);
        // vLLM names it max_model_len; llama.cpp's server meta.n_ctx_train: both, and ours.
        if (m.context_length > 0) {
            w.key("context_length"), w.value(m.context_length);
            w.key("max_model_len"), w.value(m.context_length);
        }
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.str();
}

std::string chunk_json(const std::string& id, int64_t created, const std::string& model, std::string_view content,
                       bool first, const std::optional<std::string>& finish_reason,
                       const std::optional<CompletionUsage>& usage, std::string_view extra) {
    JsonWriter w;
    w.begin_object();
    w.key("id"), w.value(id);
    w.key("object"), w.value("chat.completion.chunk");
    w.key("created"), w.value(created);
    w.key("model"), w.value(model);
    w.key("choices");
    w.begin_array();
    w.begin_object();
    w.key("index"), w.value(0);
    w.key("delta");
    w.begin_object();
    if (first) w.key("role"), w.value("assistant");
    if (!content.empty() || first) w.key("content"), w.value(content);
    w.end_object();
    w.key("finish_reason");
    if (finish_reason) w.value(*finish_reason);
    else w.null();
    w.end_object();
    w.end_array();
    if (usage) write_usage(w, *usage);
    w.end_object();
    return with_extra(w.str(), extra);
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model, std::string_view content,
                            const std::string& finish_reason, const CompletionUsage& usage, std::string_view extra) {
    JsonWriter w;
    w.begin_object();
    w.key("id"), w.value(id);
    w.key("object"), w.value("chat.completion");
    w.key("created"), w.value(created);
    w.key("model"), w.value(model);
    w.key("choices");
    w.begin_array();
    w.begin_object();
    w.key("index"), w.value(0);
    w.key("message");
    w.begin_object();
    w.key("role"), w.value("assistant");
    w.key("content"), w.value(content);
    w.end_object();
    w.key("finish_reason"), w.value(finish_reason);
    w.end_object();
    w.end_array();
    write_usage(w, usage);
    w.end_object();
    return with_extra(w.str(), extra);
}

std::string error_json(std::string_view message, std::string_view type, int code) {
    JsonWriter w;
    w.begin_object();
    w.key("error");
    w.begin_object();
    w.key("message"), w.value(message);
    w.key("type"), w.value(type);
    w.key("code"), w.value(code);
    w.end_object();
    w.end_object();
    return w.str();
}

std::string answer_extra_json(const Answer& a, const std::string& read_summary, int64_t chat_id) {
    JsonWriter w;
    w.begin_object();
    w.key("question"), w.value(a.question);
    w.key("citations");
    w.begin_array();
    for (size_t i = 0; i < a.citations.size(); ++i) {
        const Citation& c = a.citations[i];
        if (!a.used(i)) continue;
        w.begin_object();
        w.key("number"), w.value(c.number);
        w.key("locator"), w.value(c.locator);
        w.key("path"), w.value(c.path);
        w.key("kind"), w.value(doc::to_string(c.kind));
        w.key("unit"), w.value(c.ref.unit);
        if (c.kind == doc::DocumentKind::Pdf) w.key("page"), w.value(c.ref.unit + 1);
        if (c.kind == doc::DocumentKind::Slides) w.key("slide"), w.value(c.ref.unit + 1);
        if (c.kind == doc::DocumentKind::Text) w.key("section"), w.value(c.ref.unit + 1);
        if (c.ref.time) {
            w.key("t0"), w.value(c.ref.time->t0);
            w.key("t1"), w.value(c.ref.time->t1);
        }
        w.key("snippet"), w.value(c.snippet);
        w.key("weak"), w.value(a.weak(i));
        w.end_object();
    }
    w.end_array();
    w.key("read"), w.value(read_summary);
    w.key("chat_id"), w.value(chat_id);
    w.end_object();
    return w.str();
}

const char* finish_reason_of(const std::string& stop_reason) {
    return stop_reason == "max tokens" || stop_reason == "context full" ? "length" : "stop";
}

}  // namespace sl
