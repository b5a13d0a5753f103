#include "core/kvcache/kv_cache.h"

#include "core/util/error.h"

namespace sl {

KvCache::KvCache(int n_layer, int n_ctx, int n_kv_head, int head_dim)
    : n_layer_(n_layer), n_ctx_(n_ctx), n_kv_head_(n_kv_head), head_dim_(head_dim),
      row_(static_cast<int64_t>(n_kv_head) * head_dim) {
    if (n_layer <= 0 || n_ctx <= 0 || n_kv_head <= 0 || head_dim <= 0)
        throw Error("KV cache: invalid shape");
    const size_t per_layer = static_cast<size_t>(n_ctx) * static_cast<size_t>(row_);
    k_.assign(static_cast<size_t>(n_layer), std::vector<float>(per_layer));
    v_.assign(static_cast<size_t>(n_layer), std::vector<float>(per_layer));
}

size_t KvCache::bytes() const {
    return 2 * static_cast<size_t>(n_layer_) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(row_) * sizeof(float);
}

}  // namespace sl
