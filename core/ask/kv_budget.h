// The library's kv/ folder under a size cap: saved contexts are large (SmolLM2: ~22 KB per token
// in f16, 170 MB for 8K tokens), so after each question the folder is trimmed, least recently used
// first (a record's updated_ms: saving or restoring it touches it). Files no record names (left by
// a crash) and *.tmp files go first. Files in `keep` (the context just used) are never removed, nor
// the base of a kept delta file (core/kvcache/kv_file.h); removing a base removes its deltas.
// Files in `exempt` are neither removed nor counted: the library's own prefill that a question
// reads is sized by its own budget (131,072 tokens by default: 2.9 GB for SmolLM2, more than the
// default cap) and the cap holds the question contexts saved beside it.
//
// Threading: the calling thread, which owns `lib`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sl {

class Library;

struct KvTrim {
    int removed = 0;         // files removed
    int64_t freed = 0;       // their bytes
    int64_t total = 0;       // bytes in kv/ afterwards, the exempt files' not counted
};

KvTrim trim_kv_folder(Library& lib, int64_t cap_bytes, const std::vector<std::string>& keep,
                      const std::vector<std::string>& exempt = {});

}  // namespace sl
