#include "core/ask/unit_ranking.h"

#include <algorithm>
#include <numeric>

#include "core/answer/verify.h"
#include "core/ask/unit_embeddings.h"
#include "core/context/context_builder.h"
#include "core/context/lexical_rank.h"
#include "core/context/preselect.h"

namespace sl {

UnitRanking rank_units(const PreparedContext& p, std::string_view question, const Tokenizer& tok,
                       UnitEmbeddings* embeddings, const std::function<void(size_t, size_t)>& progress, double rrf_k) {
    UnitRanking r;
    const size_t n = p.units.size();
    r.score.assign(n, 0.0);
    r.bm25.assign(n, 0.0);
    r.cosine.assign(n, 0.0);
    r.passages.resize(n);
    r.texts.reserve(n);
    for (const auto& u : p.units) r.texts.push_back(unit_text(u, tok));

    const LexicalIndex index(r.texts);
    const auto hits = index.rank(question, n);
    for (size_t rank = 0; rank < hits.size(); ++rank) {
        r.bm25[hits[rank].passage] = hits[rank].score;
        r.score[hits[rank].passage] += 1.0 / (rrf_k + static_cast<double>(rank + 1));
    }

    if (embeddings) {
        std::vector<UnitEmbeddings::Request> req;
        req.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            const auto& m = p.units[i].meta;
            req.push_back({p.sources[static_cast<size_t>(m.source)].id, m.unit, r.texts[i]});
        }
        r.passages = embeddings->get(req, progress);
        const std::vector<float> q = embeddings->embedder().embed(question);
        std::vector<size_t> with;
        for (size_t i = 0; i < n; ++i) {
            if (r.passages[i].empty()) continue;
            double best = -1;
            for (const auto& v : r.passages[i]) best = std::max(best, cosine(q, v));
            r.cosine[i] = best;
            with.push_back(i);
        }
        std::stable_sort(with.begin(), with.end(), [&](size_t a, size_t b) { return r.cosine[a] > r.cosine[b]; });
        for (size_t rank = 0; rank < with.size(); ++rank)
            r.score[with[rank]] += 1.0 / (rrf_k + static_cast<double>(rank + 1));
        r.semantic = true;
    }

    r.order.resize(n);
    std::iota(r.order.begin(), r.order.end(), size_t{0});
    std::stable_sort(r.order.begin(), r.order.end(), [&](size_t a, size_t b) { return r.score[a] > r.score[b]; });
    return r;
}

}  // namespace sl
