// libFuzzer target for the saved-context parser (core/kvcache/kv_file.h): any bytes either parse or
// throw sl::FormatError; anything else (a crash, a sanitizer report, another exception, a huge
// allocation) is a bug. Both verification modes run.
// Seeds: tests/fuzz/corpus/fuzz_kvfile (written by tst_kv_file's writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/kvcache/kv_file.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    for (const sl::KvVerify mode : {sl::KvVerify::Full, sl::KvVerify::Headers}) {
        try {
            const sl::KvFileContents c = sl::parse_kv_file(bytes, "<fuzz>", mode);
            // Every page offset handed out must lie inside the input, whole; a delta file's pages
            // before its base's last block are the base's (offset 0), every later one is here.
            uint64_t sum = c.tokens.size() + c.logits.size();
            const uint64_t b0 = c.base.tokens / c.info.block_size;
            for (size_t i = 0; i < c.page_offset.size(); ++i) {
                const uint64_t off = c.page_offset[i];
                const bool in_base = static_cast<uint64_t>(i) % static_cast<uint64_t>(c.n_blocks) < b0;
                if (in_base) {
                    if (off != 0) __builtin_trap();
                    continue;
                }
                if (off == 0 || off + c.info.page_bytes > size) __builtin_trap();
                sum += data[off] + data[off + c.info.page_bytes - 1];
            }
            // Index keys: assembled only from records inside the input.
            for (size_t l = 0; l < c.index_n.size(); ++l) {
                for (const auto& r : c.index_records[l])
                    if (r.offset + r.count * c.index_dim[l] * 4 > size) __builtin_trap();
                sum += sl::read_index_keys(bytes, c, static_cast<int>(l)).size();
            }
            // Block summaries: the same, from the first block and from a delta's.
            for (size_t l = 0; l < c.summary_n.size(); ++l) {
                for (const auto& r : c.summary_records[l])
                    if (r.offset + r.count * c.summary_floats[l] * 4 > size) __builtin_trap();
                sum += sl::read_block_summaries(bytes, c, static_cast<int>(l)).size();
                if (c.summary_block[l] > 0)
                    sum += sl::read_block_summaries(bytes, c, static_cast<int>(l), static_cast<int64_t>(c.base.tokens / c.summary_block[l])).size();
            }
            volatile uint64_t sink = sum;
            (void)sink;
        } catch (const sl::FormatError&) {
        }
    }
    return 0;
}
