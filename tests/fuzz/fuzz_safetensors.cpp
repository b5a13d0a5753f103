// libFuzzer target for the safetensors reader (and the JSON parser under it): any bytes either
// parse or throw sl::FormatError; anything else (a crash, a sanitizer report, another exception, a
// huge allocation) is a bug. Every tensor handed out is touched at both ends, so a view outside
// the input shows up under ASan.
// Seeds: tests/fuzz/corpus/fuzz_safetensors (written by tst_safetensors' writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/embed/safetensors.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const sl::SafetensorsFile f =
            sl::SafetensorsFile::parse(std::span<const uint8_t>(data, size), "<fuzz>");
        volatile uint64_t sum = 0;
        for (const auto& [k, v] : f.metadata()) sum = sum + k.size() + v.size();
        for (const auto& t : f.tensors()) {
            if (f.find(t.name) != &t) __builtin_trap();
            if (t.n_bytes != t.n_elements * sl::dtype_size(t.dtype)) __builtin_trap();
            if (t.n_bytes) sum = sum + t.data[0] + t.data[t.n_bytes - 1];
            // Conversions of small float tensors (bounded so the fuzzer cannot ask for gigabytes).
            if (t.n_elements <= 4096) {
                try {
                    const auto v = f.to_f32(t);
                    if (!v.empty()) sum = sum + static_cast<uint64_t>(v.back() == v.back());
                } catch (const sl::FormatError&) {
                }
            }
        }
    } catch (const sl::FormatError&) {
    }
    return 0;
}
