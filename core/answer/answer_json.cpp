#include "core/answer/answer_json.h"

#include <cmath>

#include "core/embed/json.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace sl {

std::string answer_to_json(const Answer& a) {
    JsonWriter w;
    w.begin_object();
    w.key("version"), w.value(1);
    w.key("question"), w.value(a.question);
    w.key("text"), w.value(a.text);
    w.key("document_mass"), w.value(a.document_mass);
    w.key("steps"), w.value(a.steps);
    if (!a.stop_reason.empty()) w.key("stop_reason"), w.value(a.stop_reason);
    if (a.cut) w.key("cut"), w.value(true);
    w.key("sentences");
    w.begin_array();
    for (const auto& s : a.sentences) {
        w.begin_object();
        w.key("begin"), w.value(static_cast<int64_t>(s.begin));
        w.key("end"), w.value(static_cast<int64_t>(s.end));
        w.key("supports");
        w.begin_array();
        for (const auto& p : s.supports) {
            w.begin_object();
            w.key("citation"), w.value(p.citation);
            w.key("mass"), w.value(p.mass);
            w.key("lexical"), w.value(p.lexical);
            if (p.semantic) w.key("semantic"), w.value(*p.semantic);
            w.key("verified"), w.value(p.verified);
            w.key("weak"), w.value(p.weak);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.key("citations");
    w.begin_array();
    for (const auto& c : a.citations) {
        w.begin_object();
        w.key("number"), w.value(c.number);
        w.key("unit"), w.value(c.unit);
        w.key("locator"), w.value(c.locator);
        w.key("path"), w.value(c.path);
        w.key("kind"), w.value(static_cast<int>(c.kind));
        w.key("document"), w.value(c.ref.document);
        w.key("unit_index"), w.value(c.ref.unit);
        if (c.ref.bbox) {
            w.key("bbox");
            w.begin_array();
            w.value(static_cast<double>(c.ref.bbox->x0)), w.value(static_cast<double>(c.ref.bbox->y0));
            w.value(static_cast<double>(c.ref.bbox->x1)), w.value(static_cast<double>(c.ref.bbox->y1));
            w.end_array();
        }
        if (c.ref.time) {
            w.key("time");
            w.begin_array();
            w.value(c.ref.time->t0), w.value(c.ref.time->t1);
            w.end_array();
        }
        w.key("mass"), w.value(c.mass);
        w.key("share"), w.value(c.share);
        w.key("begin"), w.value(c.begin);
        w.key("end"), w.value(c.end);
        w.key("snippet"), w.value(c.snippet);
        w.key("text"), w.value(c.text);
        w.key("lexical"), w.value(c.lexical);
        if (c.semantic) w.key("semantic"), w.value(*c.semantic);
        w.key("score"), w.value(c.score);
        w.end_object();
    }
    w.end_array();
    if (!a.ranking.empty()) {
        w.key("ranking");
        w.begin_array();
        for (const auto& r : a.ranking) {
            w.begin_object();
            w.key("path"), w.value(r.path);
            w.key("unit_index"), w.value(r.unit_index);
            if (r.time) {
                w.key("time");
                w.begin_array();
                w.value(r.time->t0), w.value(r.time->t1);
                w.end_array();
            }
            w.key("mass"), w.value(r.mass);
            w.key("lexical"), w.value(r.lexical);
            w.key("bm25"), w.value(r.bm25);
            w.key("question"), w.value(r.question);
            if (r.semantic) w.key("semantic"), w.value(*r.semantic);
            w.key("score"), w.value(r.score);
            w.end_object();
        }
        w.end_array();
    }
    w.end_object();
    return w.str();
}

namespace {

const JsonValue null_value{};

const JsonValue& at(const JsonValue& o, std::string_view k) {
    const JsonValue* v = o.find(k);
    return v ? *v : null_value;
}
std::string str(const JsonValue& o, std::string_view k) {
    const JsonValue& v = at(o, k);
    return v.is_string() ? v.text() : std::string();
}
double num(const JsonValue& o, std::string_view k, double dflt = 0) {
    const JsonValue& v = at(o, k);
    return v.is_number() ? v.as_double() : dflt;
}
int64_t integer(const JsonValue& o, std::string_view k, int64_t dflt = 0) {
    const double d = num(o, k, static_cast<double>(dflt));
    return std::isfinite(d) && std::fabs(d) < 9e18 ? static_cast<int64_t>(d) : dflt;
}
bool boolean(const JsonValue& o, std::string_view k) {
    const JsonValue& v = at(o, k);
    return v.type() == JsonValue::Type::Bool && v.as_bool();
}

}  // namespace

Answer answer_from_json(const std::string& json, const std::string& what) {
    const JsonValue o = JsonValue::parse(json, what);
    if (!o.is_object()) throw FormatError(what + ": not an answer (not a JSON object)");
    if (integer(o, "version") != 1) throw FormatError(what + ": unknown answer format version");
    Answer a;
    a.question = str(o, "question");
    a.text = str(o, "text");
    a.document_mass = num(o, "document_mass");
    a.steps = static_cast<int>(integer(o, "steps"));
    a.stop_reason = str(o, "stop_reason");
    a.cut = boolean(o, "cut");
    for (const auto& co : at(o, "citations").items()) {
        Citation c;
        c.number = static_cast<int>(integer(co, "number"));
        c.unit = static_cast<int>(integer(co, "unit"));
        c.locator = str(co, "locator");
        c.path = str(co, "path");
        const int64_t kind = integer(co, "kind");
        if (kind < 0 || kind > static_cast<int>(doc::DocumentKind::Text)) throw FormatError(what + ": bad document kind");
        c.kind = static_cast<doc::DocumentKind>(kind);
        c.ref.document = str(co, "document");
        c.ref.unit = static_cast<int>(integer(co, "unit_index"));
        if (const JsonValue* b = co.find("bbox")) {
            if (b->items().size() != 4) throw FormatError(what + ": bbox needs 4 numbers");
            const auto& i = b->items();
            c.ref.bbox = doc::BBox{static_cast<float>(i[0].as_double()), static_cast<float>(i[1].as_double()),
                                   static_cast<float>(i[2].as_double()), static_cast<float>(i[3].as_double())};
        }
        if (const JsonValue* t = co.find("time")) {
            if (t->items().size() != 2) throw FormatError(what + ": time needs 2 numbers");
            c.ref.time = doc::TimeRange{t->items()[0].as_double(), t->items()[1].as_double()};
        }
        c.mass = num(co, "mass");
        c.share = num(co, "share");
        c.begin = integer(co, "begin");
        c.end = integer(co, "end");
        c.snippet = str(co, "snippet");
        c.text = str(co, "text");
        c.lexical = num(co, "lexical");
        if (at(co, "semantic").is_number()) c.semantic = num(co, "semantic");
        c.score = num(co, "score");
        a.citations.push_back(std::move(c));
    }
    const auto n_cit = static_cast<int>(a.citations.size());
    for (const auto& so : at(o, "sentences").items()) {
        AnswerSentence s;
        const int64_t b = integer(so, "begin"), e = integer(so, "end");
        if (b < 0 || b > e || static_cast<size_t>(e) > a.text.size()) throw FormatError(what + ": sentence outside the text");
        s.begin = static_cast<size_t>(b);
        s.end = static_cast<size_t>(e);
        for (const auto& po : at(so, "supports").items()) {
            Support p;
            p.citation = static_cast<int>(integer(po, "citation", -1));
            if (p.citation < 0 || p.citation >= n_cit) throw FormatError(what + ": support names no citation");
            p.mass = num(po, "mass");
            p.lexical = num(po, "lexical");
            if (at(po, "semantic").is_number()) p.semantic = num(po, "semantic");
            p.verified = boolean(po, "verified");
            p.weak = boolean(po, "weak");
            s.supports.push_back(p);
        }
        a.sentences.push_back(std::move(s));
    }
    for (const auto& ro : at(o, "ranking").items()) {
        RankedSource r;
        r.path = str(ro, "path");
        r.unit_index = static_cast<int>(integer(ro, "unit_index"));
        if (const JsonValue* t = ro.find("time"); t && t->items().size() == 2)
            r.time = doc::TimeRange{t->items()[0].as_double(), t->items()[1].as_double()};
        r.mass = num(ro, "mass");
        r.lexical = num(ro, "lexical");
        r.bm25 = num(ro, "bm25");
        r.question = num(ro, "question");
        if (at(ro, "semantic").is_number()) r.semantic = num(ro, "semantic");
        r.score = num(ro, "score");
        a.ranking.push_back(std::move(r));
    }
    return a;
}

}  // namespace sl
