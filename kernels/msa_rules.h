// Rules of MSA's training-free selection that the CPU (core/attention/block_select.cpp) and the
// device (kernels/cuda/msa_grow.cu) must apply alike, written once for both compilers: how much a
// selection may grow with the context, and which queries of a query block the mass estimate reads.
// Pure functions; no state.
#pragma once

#include <cstdint>

#ifndef SL_HOST_DEVICE
#if defined(__CUDACC__)
#define SL_HOST_DEVICE __host__ __device__
#else
#define SL_HOST_DEVICE
#endif
#endif

namespace sl::msa_rules {

// Queries per selection whose index rows the mass estimate reads (SelectParams::mass).
inline constexpr int kMassRows = 8;

// The most blocks the mass growth may add to a selection whose query sees `visible` blocks:
// `room` (top_k * (grow - 1)), shrunk past `full` visible blocks to room * (full / visible)^2,
// rounded down, at least 1 (SelectParams::grow_full). full <= 0: the whole room at every length.
SL_HOST_DEVICE inline int64_t growth_room(int64_t room, int64_t full, int64_t visible) {
    if (full <= 0 || visible <= full || room <= 0) return room;
    const double f = static_cast<double>(full) / static_cast<double>(visible);
    const auto shrunk = static_cast<int64_t>(static_cast<double>(room) * f * f);
    return shrunk > 1 ? shrunk : 1;
}

// Queries the mass estimate samples from a query block of n_queries (the last one included):
// min(n_queries, kMassRows).
SL_HOST_DEVICE inline int mass_samples(int n_queries) { return n_queries < kMassRows ? n_queries : kMassRows; }

// The query (0-based, within the block) of sample i < n_samples: spread evenly, the last sample on
// the last query.
SL_HOST_DEVICE inline int mass_sample_query(int i, int n_queries, int n_samples) {
    return static_cast<int>((static_cast<int64_t>(i) + 1) * n_queries / n_samples - 1);
}

}  // namespace sl::msa_rules
