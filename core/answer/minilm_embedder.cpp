#include "core/answer/minilm_embedder.h"

#include <filesystem>

#include "core/util/error.h"

namespace sl {

InstalledMiniLm InstalledMiniLm::open() {
    InstalledMiniLm m;
    const std::filesystem::path dir = SentenceEmbedder::default_dir();
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        m.note = "all-MiniLM-L6-v2 is not installed (" + dir.string() + ")";
        return m;
    }
    try {
        m.model = SentenceEmbedder::open(dir.string());
        m.embedder = std::make_unique<MiniLmEmbedder>(*m.model);
    } catch (const Error& e) {
        m.model.reset();
        m.note = e.what();
    }
    return m;
}

}  // namespace sl
