// libFuzzer target for the mmproj loader (core/vision): any bytes either load as a vision tower or
// throw sl::FormatError; anything else (a crash, a sanitizer report, another exception, a huge
// allocation) is a bug. When a file loads, a tile plan and token layout are computed from its
// config and, for towers small enough to run in a moment, one tile is encoded.
// Built by tests/fuzz/CMakeLists.txt (fuzz preset). Seeds: tiny mmproj files from
// tests/reference/vision/make_tiny_mmproj.py (e.g. `--image-size 8 --patch-size 2 --embd 8
// --heads 2 --ffn 8 --layers 1 --out-embd 8`), put in tests/fuzz/corpus/fuzz_mmproj/.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/gguf/gguf_reader.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const sl::GgufFile f = sl::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
        const sl::VisionModel m = sl::read_vision_model(f);
        const sl::VisionConfig& c = m.config;
        volatile int n = sl::image_tokens(c, 37, 23);
        (void)n;
        const int64_t work = int64_t{c.n_patches()} * c.n_embd * (c.n_embd + c.n_ff) * c.n_layer;
        if (work < (int64_t{1} << 22)) {
            static sl::ThreadPool pool(1);
            sl::VisionEncoder enc(m, pool);
            std::vector<float> tile(3 * static_cast<size_t>(c.image_size) * static_cast<size_t>(c.image_size), 0.25f);
            std::vector<float> out(static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.n_embd_out));
            enc.encode_tile(tile.data(), out.data());
        }
    } catch (const sl::FormatError&) {
    }
    return 0;
}
