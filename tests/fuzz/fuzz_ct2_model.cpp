// libFuzzer target for the CTranslate2 model.bin reader (core/whisper/ct2_model.h): any bytes
// either parse or throw sl::FormatError; anything else (a crash, a sanitizer report, another
// exception, a huge allocation) is a bug. Every variable handed out is touched at both ends, so a
// view outside the input shows up under ASan; small ones are converted to float32 and scalars read.
// Seeds: tests/fuzz/corpus/fuzz_ct2_model (written by tst_ct2_model's writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/util/error.h"
#include "core/whisper/ct2_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const sl::Ct2Model m = sl::Ct2Model::parse(std::span<const uint8_t>(data, size), "<fuzz>");
        volatile uint64_t sum = m.spec_name().size();
        for (const auto& v : m.variables()) {
            if (m.find(v.name) != &v) __builtin_trap();
            if (v.n_bytes != v.n_elements * sl::ct2_dtype_size(v.dtype)) __builtin_trap();
            if (v.n_bytes) sum = sum + v.data[0] + v.data[v.n_bytes - 1];
            if (v.n_elements <= 4096) {  // bounded so the fuzzer cannot ask for gigabytes
                try {
                    const auto x = m.to_f32(v.name);
                    if (x.size() != v.n_elements) __builtin_trap();
                    if (!x.empty()) sum = sum + static_cast<uint64_t>(x.back() == x.back());
                } catch (const sl::FormatError&) {
                }
            }
            if (v.shape.empty()) {
                try {
                    sum = sum + static_cast<uint64_t>(m.scalar_int(v.name));
                } catch (const sl::FormatError&) {
                }
            }
        }
        for (const auto& [alias, target] : m.aliases())
            if (m.find(alias) != m.find(target) || m.find(alias) == nullptr) __builtin_trap();
    } catch (const sl::FormatError&) {
    }
    return 0;
}
