#include "core/ask/library_context.h"

#include "core/ask/ask.h"
#include "core/ask/attention_choice.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/sha256.h"

#include <algorithm>

namespace sl {

LibraryContext library_context(Library& lib, const LoadedModel& model, int64_t max_tokens) {
    std::vector<DocId> ids;
    const std::vector<doc::Document> docs = ready_documents(lib, ids);
    return library_context(docs, ids, lib, model, max_tokens);
}

LibraryContext library_context(const std::vector<doc::Document>& docs, const std::vector<DocId>& ids, Library& lib,
                               const LoadedModel& model, int64_t max_tokens) {
    LibraryContext c;
    c.ids = ids;
    std::vector<const doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);

    const EffortSettings es = effort_settings(Effort::Medium);
    ContextOptions co;
    co.sink_block = c.msa.block_size;
    co.render_px = es.render_px;
    c.builder_options = co;
    const ContextBuilder builder(*model.tokenizer, *model.chat, co);
    c.prepared = builder.prepare(ptrs);
    c.plan = plan_budget(c.prepared, max_tokens, es);
    c.stream = builder.assemble(c.prepared, &c.plan);

    const AttentionChoice att =
        choose_attention(model.model->config(), static_cast<int64_t>(c.stream.tokens.size()), Effort::Medium);
    c.msa = att.config;

    const std::string hash = sha256_hex(std::string_view(reinterpret_cast<const char*>(c.stream.tokens.data()),
                                                         c.stream.tokens.size() * sizeof(int32_t)));
    c.path = (lib.kv_dir() / ("library-" + hash.substr(0, 24) + ".slkv")).string();
    c.spec.msa = true;
    c.spec.block = c.msa.block_size;
    c.spec.top_k = c.msa.top_k;
    c.spec.scoring = att.mode;
    c.spec.remap_window = c.msa.positions == PositionMode::Remap ? c.msa.remap_window : 0;
    c.spec.library_prefill = true;
    c.spec.max_tokens = max_tokens;
    c.spec.prefix_sha256 = hash;
    c.fingerprint = model_fingerprint(model);
    return c;
}

LibraryPrefill::LibraryPrefill(Library& lib, const LoadedModel& model, LibraryPrefillOptions o)
    : lib_(lib), context_(library_context(lib, model, o.max_tokens)) {
    SessionOptions so;
    so.n_ctx = static_cast<int>(context_.stream.tokens.size()) + 1024;  // room for a question and an answer
    so.kv_block = context_.msa.block_size;
    so.device = o.device;
    so.device_kv_budget_bytes = o.device_kv_budget_bytes;
    so.kv_budget_bytes = o.kv_budget_bytes;
    so.needs.save_restore = true;  // saved as it goes, resumed from its file
    session_ = std::make_unique<Session>(model, so, std::make_unique<MsaAttention>(context_.msa));
    PrefillOptions po;
    po.save_every = o.save_every;
    po.progress_interval = o.progress_interval;
    // Seeds: the library's other saved contexts for this model (before a document was added, the
    // context was the same up to the new document): the longest shared prefix is not prefilled again.
    for (const KvCacheRecord& r : lib_.list_kv_caches()) {
        if (r.model_fingerprint != context_.fingerprint || r.path == context_.path || r.n_tokens <= 0) continue;
        const auto spec = ContextSpec::decode(r.settings);
        if (spec && spec->library_prefill) po.seeds.push_back(r.path);
    }
    prefill_ = std::make_unique<ProgressivePrefill>(*session_, context_.stream.tokens, context_.path, po);
    if (auto old = lib_.find_kv_cache(context_.fingerprint, context_.ids, context_.spec.encode())) record_id_ = old->id;
}

const std::string& LibraryPrefill::device_reason() const { return session_->device_reason(); }

LibraryPrefill::~LibraryPrefill() {
    if (prefill_) {
        prefill_->cancel();
        prefill_->wait();
    }
}

void LibraryPrefill::start() { prefill_->start(); }
void LibraryPrefill::run() { prefill_->run(); }
void LibraryPrefill::cancel() { prefill_->cancel(); }
void LibraryPrefill::wait() { prefill_->wait(); }
bool LibraryPrefill::running() const { return prefill_->running(); }
PrefillStatus LibraryPrefill::status() const { return prefill_->status(); }

void LibraryPrefill::record() {
    const PrefillStatus st = prefill_->status();
    const bool complete = st.finished && st.saved == st.total;
    if (st.saved == recorded_ && complete == recorded_complete_) return;
    if (st.saved == 0 && !complete) return;  // nothing saved yet: nothing a reader could use
    KvCacheRecord rec;
    rec.id = record_id_;
    rec.path = context_.path;
    rec.model_fingerprint = context_.fingerprint;
    rec.documents = context_.ids;
    rec.n_tokens = st.saved;
    rec.total_tokens = static_cast<int64_t>(context_.stream.tokens.size());
    rec.settings = context_.spec.encode();
    rec.state = complete ? KvCacheState::Complete : KvCacheState::Partial;
    record_id_ = lib_.save_kv_cache(rec);
    recorded_ = st.saved;
    recorded_complete_ = complete;
}

}  // namespace sl
