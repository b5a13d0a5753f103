// A small JSON writer for the engine's own records (answers, context specs): core stays free of
// Qt, so this replaces QJsonDocument's writing side there (core/embed/json.h reads).
//
//   JsonWriter w;
//   w.begin_object(); w.key("n"); w.value(3); w.key("s"); w.value("x"); w.end_object();
//   std::string text = w.str();   // {"n":3,"s":"x"}
//
// Compact output, keys in the order written. Strings are escaped per RFC 8259 (control
// characters as \u00XX); the caller passes valid UTF-8. Doubles are written with 17 significant
// digits (they read back exactly); NaN and infinities, which JSON cannot hold, are written as 0.
// Not thread-safe; one writer per document.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sl {

class JsonWriter {
public:
    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    void key(std::string_view k);   // inside an object, before each value
    void value(std::string_view s);
    void value(const char* s) { value(std::string_view(s)); }
    void value(const std::string& s) { value(std::string_view(s)); }
    void value(double d);
    void value(int64_t i);
    void value(int i) { value(static_cast<int64_t>(i)); }
    void value(bool b);
    void null();

    const std::string& str() const { return out_; }

private:
    void sep();
    std::string out_;
    std::vector<bool> first_;  // per open container: no value written yet
    bool after_key_ = false;
};

// `s` as a JSON string literal, quotes included; always valid UTF-8 (bytes of `s` that are not
// valid UTF-8 become U+FFFD).
std::string json_quote(std::string_view s);

}  // namespace sl
