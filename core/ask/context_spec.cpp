#include "core/ask/context_spec.h"

#include "core/embed/json.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace sl {

std::string ContextSpec::encode() const {
    JsonWriter w;
    w.begin_object();
    w.key("attention"), w.value(msa ? "msa" : "dense");
    w.key("block"), w.value(block);
    if (msa) w.key("top_k"), w.value(top_k);
    if (!scoring.empty()) w.key("scoring"), w.value(scoring);
    if (remap_window > 0) w.key("remap"), w.value(remap_window);
    if (library_prefill) {
        w.key("library_prefill"), w.value(true);
        w.key("max_tokens"), w.value(max_tokens);
    }
    w.key("prefix_sha256"), w.value(prefix_sha256);
    if (!vision.empty()) w.key("vision"), w.value(vision);
    w.end_object();
    return w.str();
}

std::optional<ContextSpec> ContextSpec::decode(std::string_view text) {
    try {
        const JsonValue o = JsonValue::parse(text, "context settings");
        if (!o.is_object()) return std::nullopt;
        ContextSpec s;
        const JsonValue* att = o.find("attention");
        const JsonValue* block = o.find("block");
        const JsonValue* hash = o.find("prefix_sha256");
        if (!att || !att->is_string() || !block || !block->is_number() || !hash || !hash->is_string())
            return std::nullopt;
        if (att->text() != "msa" && att->text() != "dense") return std::nullopt;
        s.msa = att->text() == "msa";
        s.block = static_cast<int>(block->as_double());
        s.prefix_sha256 = hash->text();
        if (const JsonValue* v = o.find("top_k"); v && v->is_number()) s.top_k = static_cast<int>(v->as_double());
        if (const JsonValue* v = o.find("scoring"); v && v->is_string()) s.scoring = v->text();
        if (const JsonValue* v = o.find("remap"); v && v->is_number()) s.remap_window = static_cast<int>(v->as_double());
        if (const JsonValue* v = o.find("library_prefill"); v && v->type() == JsonValue::Type::Bool)
            s.library_prefill = v->as_bool();
        if (const JsonValue* v = o.find("vision"); v && v->is_string()) s.vision = v->text();
        if (const JsonValue* v = o.find("max_tokens"); v && v->is_number())
            s.max_tokens = static_cast<int64_t>(v->as_double());
        return s;
    } catch (const Error&) {
        return std::nullopt;
    }
}

}  // namespace sl
