// libFuzzer target for the JSON around the document model. Sightline has no reader for the
// Document's own JSON (ingest/document_json writes it for `ingest --json`; the library stores
// documents in tables), so this covers the JSON that is read back and the document writer:
// - core/embed/json (the strict parser every core JSON reader uses) and answer_from_json (the
//   answers with their citations that the library keeps as JSON text, read again by reports and
//   the evaluation): any bytes parse or throw sl::FormatError; an answer that reads writes back
//   to JSON that reads to the same JSON again;
// - to_json_bytes of a Document built from the input (any bytes in every string, odd floats): the
//   output is always strict, valid UTF-8 JSON with every unit and block in it; the locators
//   (doc::unit_locator, full_locator) take any unit.
// Anything else (a crash, a sanitizer report, another exception) is a bug.
//
// Input: one mode byte; even: the rest is JSON text; odd: the rest builds a Document (strings cut
// at '\n', numbers taken from the bytes).
// Seeds: tests/fuzz/corpus/fuzz_document_json (written by tests/fuzz/make_seeds.py).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/answer/answer_json.h"
#include "core/document/document.h"
#include "core/document/locator.h"
#include "core/embed/json.h"
#include "core/util/error.h"
#include "ingest/document_json.h"

namespace {

size_t touch(const sl::JsonValue& v, int depth = 0) {
    size_t n = 1 + v.text().size();
    if (depth > 80) __builtin_trap();  // the parser nests at most 64 deep
    if (v.is_number()) {
        volatile double d = v.as_double();
        (void)d;
        (void)v.as_u64();
    }
    for (const auto& i : v.items()) n += touch(i, depth + 1);
    for (const auto& [k, m] : v.members()) n += k.size() + touch(m, depth + 1);
    return n;
}

void fuzz_json(std::string_view text) {
    try {
        const sl::JsonValue v = sl::JsonValue::parse(text, "fuzz.json");
        volatile size_t sink = touch(v);
        (void)sink;
    } catch (const sl::FormatError&) {
    }
    try {
        const sl::Answer a = sl::answer_from_json(std::string(text), "fuzz answer");
        const std::string once = sl::answer_to_json(a);
        const std::string twice = sl::answer_to_json(sl::answer_from_json(once, "written answer"));
        if (once != twice) __builtin_trap();
        volatile size_t sink = a.with_markers().size() + a.sources_text().size();
        (void)sink;
    } catch (const sl::FormatError&) {
    }
}

// Cuts the input into strings and numbers.
struct Bytes {
    std::string_view in;
    std::string str() {
        const size_t at = in.find('\n');
        const std::string_view s = in.substr(0, at);
        in.remove_prefix(at == std::string_view::npos ? in.size() : at + 1);
        return std::string(s);
    }
    template <class T>
    T num() {
        T v{};
        const size_t n = std::min(sizeof(T), in.size());
        std::memcpy(&v, in.data(), n);
        in.remove_prefix(n);
        return v;
    }
    bool done() const { return in.empty(); }
};

void fuzz_document(std::string_view in) {
    using namespace sl::doc;
    Bytes b{in};
    Document d;
    d.path = b.str();
    d.id = b.str();
    d.title = b.str();
    d.kind = static_cast<DocumentKind>(b.num<uint8_t>() % 6);
    d.duration = b.num<double>();
    d.metadata[b.str()] = b.str();
    while (!b.done() && d.units.size() < 64) {
        Unit u;
        const auto k = b.num<uint8_t>();
        u.kind = static_cast<UnitKind>(k % 5);
        u.index = static_cast<int>(d.units.size());
        u.label = b.str();
        if (k & 0x10) u.time = TimeRange{b.num<double>(), b.num<double>()};
        u.width = b.num<float>();
        u.height = b.num<float>();
        u.rotation = b.num<int8_t>() * 90;
        Block blk;
        blk.role = static_cast<BlockRole>(b.num<uint8_t>() % 8);
        blk.text = b.str();
        if (k & 0x20) blk.bbox = BBox{b.num<float>(), b.num<float>(), b.num<float>(), b.num<float>()};
        if (k & 0x40) blk.time = TimeRange{b.num<double>(), b.num<double>()};
        blk.confidence = b.num<float>();
        blk.lines.push_back({b.str(), BBox{b.num<float>(), 0, 1, 1}});
        u.blocks.push_back(blk);
        Visual v;
        v.kind = static_cast<VisualKind>(b.num<uint8_t>() % 3);
        if (k & 0x80) v.timestamp = b.num<double>();
        v.width = b.num<int16_t>();
        v.height = b.num<int16_t>();
        v.locator = b.str();
        v.mime = b.str();
        u.visuals.push_back(v);
        d.units.push_back(std::move(u));
        d.outline.push_back({b.str(), b.num<uint8_t>(), b.num<int8_t>(), std::nullopt});
        d.links.push_back({b.num<int8_t>(), BBox{}, b.str(), b.num<int8_t>()});
    }
    volatile size_t sink = 0;
    for (const Unit& u : d.units)
        sink = sink + unit_locator(d, u).size() + full_locator(d, u).size();
    for (const bool lines : {false, true}) {
        const QByteArray bytes = sl::ingest::to_json_bytes(d, lines);
        try {
            const sl::JsonValue v = sl::JsonValue::parse(
                std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())), "written");
            const sl::JsonValue* units = v.find("units");
            if (!units || units->items().size() != d.units.size()) __builtin_trap();
            for (const auto& u : units->items()) {
                const sl::JsonValue* blocks = u.find("blocks");
                if (!blocks || blocks->items().size() != 1) __builtin_trap();
            }
        } catch (const sl::FormatError&) {
            __builtin_trap();  // the writer wrote something that is not strict JSON
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] & 1)
        fuzz_document(rest);
    else
        fuzz_json(rest);
    return 0;
}
