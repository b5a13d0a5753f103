#include "core/ask/question_cache.h"

#include <algorithm>
#include <filesystem>

#include "core/context/preselect.h"
#include "core/kvcache/kv_file.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/error.h"

namespace sl {

bool restore_question_context(Library& lib, Session& session, const std::string& fingerprint,
                              const std::vector<DocId>& ids, const ContextSpec& spec, const std::vector<int32_t>& tokens,
                              QuestionCacheNote& note, const std::string& held_base) {
    auto rec = lib.find_kv_cache(fingerprint, ids, spec.encode());
    std::error_code ec;
    note.onto = false;
    if (!rec || rec->state != KvCacheState::Complete || !std::filesystem::is_regular_file(rec->path, ec)) return false;
    const KvFileBase base = kv_file_base(rec->path);
    const std::string base_path = base.empty() ? std::string() : (std::filesystem::path(rec->path).parent_path() / base.name).string();
    const bool onto = !held_base.empty() && !base.empty() &&
                      std::filesystem::path(base_path).lexically_normal() == std::filesystem::path(held_base).lexically_normal();
    try {
        if (onto) {
            try {
                note.onto = session.restore_delta(rec->path);
            } catch (const DamagedContextError&) {  // ask() drops the file and asks again
                throw;
            } catch (const Error& e) {  // the held session is as it was (or empty): the caller goes on from it
                note.add(std::string("saved context refused (") + e.what() + "); prefilling again");
                return false;
            }
        }
        if (!note.onto) session.restore(rec->path);
        if (session.tokens() == tokens) {
            if (note.onto)
                note.add("restored the question's " + thousands(static_cast<int64_t>(tokens.size() - base.tokens)) +
                         " own tokens from " + rec->path + " after the " + thousands(static_cast<int64_t>(base.tokens)) +
                         " kept in memory");
            else
                note.add("restored the prefilled context from " + rec->path);
            lib.save_kv_cache(*rec);  // touched: recently used
            note.used.push_back(rec->path);
            if (!base.empty()) note.used.push_back(base_path);
            return true;
        }
        note.add("saved context " + rec->path + " holds other tokens; prefilling again");
    } catch (const DamagedContextError&) {  // ask() drops the file and asks again
        throw;
    } catch (const Error& e) {
        note.add(std::string("saved context refused (") + e.what() + "); prefilling again");
    }
    session.reset();
    note.onto = false;
    return false;
}

std::optional<ContextBase> find_context_base(Library& lib, const std::string& fingerprint, const std::vector<DocId>& ids,
                                             const ContextSpec& spec, const std::vector<int32_t>& tokens, int64_t min_shared) {
    std::optional<ContextBase> best;
    const int64_t limit = static_cast<int64_t>(tokens.size()) - 1;
    for (const KvCacheRecord& rec : lib.list_kv_caches()) {
        if (rec.model_fingerprint != fingerprint || rec.documents != ids || rec.n_tokens <= 0) continue;
        const auto s = ContextSpec::decode(rec.settings);
        if (!s || s->msa != spec.msa || s->block != spec.block || (spec.msa && s->top_k != spec.top_k) ||
            s->vision != spec.vision)
            continue;
        if (!kv_file_base(rec.path).empty()) continue;  // a delta is not a base
        const std::vector<int32_t> saved = saved_context_tokens(rec.path);
        const size_t n = std::min(saved.size(), tokens.size());
        const auto shared = std::min<int64_t>(
            limit, static_cast<int64_t>(std::mismatch(saved.begin(), saved.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin()).first -
                                        saved.begin()));
        if (shared >= min_shared && (!best || shared > best->shared)) best = ContextBase{rec.path, shared};
    }
    return best;
}

void save_question_context(Library& lib, const Session& session, const std::string& fingerprint,
                           const std::vector<DocId>& ids, const ContextSpec& spec, const ContextBase* base,
                           QuestionCacheNote& note) {
    const std::string key = spec.encode();
    // Named by the whole context's hash; a delta's name says so.
    const std::string path =
        (lib.kv_dir() / ((base ? "q-" : "") + spec.prefix_sha256.substr(0, 24) + ".slkv")).string();
    try {
        if (base)
            session.save_delta(path, base->path, base->shared);
        else
            session.save(path);
        KvCacheRecord rec;
        if (auto old = lib.find_kv_cache(fingerprint, ids, key)) rec.id = old->id;
        rec.path = path;
        rec.model_fingerprint = fingerprint;
        rec.documents = ids;
        rec.n_tokens = static_cast<int64_t>(session.tokens().size());
        rec.total_tokens = rec.n_tokens;
        rec.settings = key;
        rec.state = KvCacheState::Complete;
        lib.save_kv_cache(rec);
        note.used.push_back(path);
        if (base) {
            note.used.push_back(base->path);
            note.add("saved the question's " + thousands(rec.n_tokens - base->shared) + " own tokens to " + path +
                     " (the first " + thousands(base->shared) + " are " + base->path + "'s)");
        } else {
            note.add("saved the prefilled context to " + path);
        }
    } catch (const DamagedContextError&) {  // ask() drops the file and asks again
        throw;
    } catch (const Error& e) {
        note.add(std::string("could not save the context: ") + e.what());
    }
}

}  // namespace sl
