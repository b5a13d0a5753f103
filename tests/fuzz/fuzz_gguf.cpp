// libFuzzer target for the GGUF reader: any bytes either parse or throw sl::FormatError; anything
// else (a crash, a sanitizer report, another exception, a huge allocation) is a bug.
// Seeds: tests/fuzz/corpus/fuzz_gguf (written by tst_gguf_reader's writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/gguf/gguf_reader.h"
#include "core/util/error.h"

namespace {

// Reads everything the parser handed out, so the sanitizers see any view that points outside the
// input.
uint64_t touch(const sl::GgufValue& v) {
    uint64_t sum = static_cast<uint64_t>(v.type());
    if (const auto s = v.to_string()) sum += s->empty() ? 0 : static_cast<uint8_t>(s->back());
    for (const auto s : v.strings()) sum += s.empty() ? 0 : static_cast<uint8_t>(s.front());
    for (const auto& inner : v.arrays()) sum += touch(inner);
    if (!v.raw().empty()) sum += v.raw().back();
    if (v.size() > 0) sum += static_cast<uint64_t>(v.at(v.size() - 1).type());
    return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const sl::GgufFile f = sl::GgufFile::parse(std::span<const uint8_t>(data, size));
        volatile uint64_t sum = 0;
        for (const auto& kv : f.metadata()) sum = sum + touch(kv.value) + kv.key.size();
        for (const auto& t : f.tensors()) {
            sum = sum + t.data[0] + t.data[t.n_bytes - 1];
            if (f.find_tensor(t.name) != &t) __builtin_trap();
        }
        // The typed getters on the keys a model loader reads.
        try {
            (void)f.get_string_array("tokenizer.ggml.tokens");
            (void)f.get_i32_array("tokenizer.ggml.token_type");
            (void)f.get_f32_array("tokenizer.ggml.scores");
            (void)f.get_u32("tokenizer.ggml.bos_token_id");
            if (!f.architecture().empty()) (void)sl::arch_u32(f, "block_count", 0);
        } catch (const sl::FormatError&) {
        }
    } catch (const sl::FormatError&) {
    }
    return 0;
}
