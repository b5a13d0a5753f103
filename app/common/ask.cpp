#include "app/common/ask.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "app/common/answer_json.h"
#include "app/common/library_prefill.h"
#include "core/context/preselect.h"
#include "core/answer/citations.h"
#include "core/answer/selection_collector.h"
#include "core/answer/verify.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/context/lexical_rank.h"
#include "core/library/library.h"
#include "core/prefill/progressive_prefill.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/sha256.h"

namespace sl::app {

namespace {

double since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string compact(const QJsonObject& o) { return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString(); }

}  // namespace

std::vector<doc::Document> ready_documents(Library& lib, std::vector<DocId>& ids) {
    std::vector<doc::Document> docs;
    ids.clear();
    for (const auto& info : lib.list_documents()) {
        if (info.state != DocumentState::Ready) continue;
        LoadOptions lo;
        lo.lines = false;
        lo.visual_bytes = false;
        docs.push_back(lib.load_document(info.id, lo));
        ids.push_back(info.id);
    }
    if (docs.empty()) throw Error(lib.dir().string() + ": the library has no documents (add some with `sightline-cli add FILE`)");
    return docs;
}

namespace {

// MSA with `mc` (msa set to it) or dense attention (msa null).
std::unique_ptr<Attention> make_attention(bool use_msa, const MsaConfig& mc, MsaAttention*& msa) {
    msa = nullptr;
    if (!use_msa) return std::make_unique<DenseAttention>();
    auto m = std::make_unique<MsaAttention>(mc);
    msa = m.get();
    return m;
}

void check_cancel(const AskOptions& o) {
    if (o.cancel && o.cancel->load()) throw Cancelled("the question was cancelled");
}

// Prefill in chunks, checking the cancel flag between them.
void prefill_checked(Session& session, std::span<const int32_t> tokens, const AskOptions& o) {
    constexpr size_t kChunk = 512;
    for (size_t i = 0; i < tokens.size(); i += kChunk) {
        check_cancel(o);
        session.prefill(tokens.subspan(i, std::min(kChunk, tokens.size() - i)));
    }
}

// After the prefix (ts) is in the session: the positional baseline, the question turn, the
// streamed answer with the collector recording MSA's selections, citations, verification and the
// stored chat. `extra` adds to the chat's settings.
void answer_after_prefix(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb,
                         const ContextBuilder& builder, const TokenStream& ts, Session& session, MsaAttention* msa,
                         const EffortSettings& effort, const std::vector<DocId>& ids, int n_ctx, int top_k,
                         const QJsonObject& extra, std::chrono::steady_clock::time_point t_start, AskResult& r) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    // The positional baseline: a content-free probe decoded after the prefix, then the context cut
    // back to the prefix (Session::truncate keeps the prefix's pages as they are).
    std::vector<float> baseline;
    if (o.baseline && msa) {
        try {
            SelectionCollector probe(ts, o.block_size);
            probe.attach(*msa);
            session.prefill(builder.question_tokens(""));
            GenerateOptions pg;
            pg.max_tokens = o.probe_tokens;
            pg.sampling.greedy = true;
            pg.stop = model.chat->stop_strings();
            session.generate(pg, [&](std::string_view t) {
                probe.on_text(t);
                return true;
            }, o.cancel);
            SelectionCollector::detach(*msa);
            check_cancel(o);
            baseline = probe.mean_block_mass();
            session.truncate(ts.prefix_tokens);
            r.baseline = true;
        } catch (const Cancelled&) {
            SelectionCollector::detach(*msa);
            throw;
        } catch (const Error& e) {
            SelectionCollector::detach(*msa);
            baseline.clear();
            status(std::string("positional baseline skipped: ") + e.what());
            session.truncate(ts.prefix_tokens);
        }
    }

    const std::vector<int32_t> q = builder.question_tokens(o.question);
    SelectionCollector collector(ts, o.block_size);
    if (msa) collector.attach(*msa);
    prefill_checked(session, q, o);
    GenerateOptions gen;
    gen.max_tokens = effort.answer_tokens;
    gen.sampling.greedy = true;
    gen.stop = model.chat->stop_strings();
    const auto t_decode = std::chrono::steady_clock::now();
    session.generate(gen, [&](std::string_view t) {
        if (r.first_token_seconds == 0) r.first_token_seconds = since(t_start);
        collector.on_text(t);
        if (cb.on_text) cb.on_text(t);
        return true;
    }, o.cancel);
    r.decode_seconds = since(t_decode);
    if (msa) SelectionCollector::detach(*msa);
    check_cancel(o);

    CiteOptions cite_options;
    if (r.baseline) cite_options.baseline = &baseline;
    r.answer = cite(collector, *model.tokenizer, cite_options);
    r.answer.question = o.question;
    verify(r.answer, o.embedder);

    // The chat, stored.
    QJsonObject settings = extra;
    settings[QStringLiteral("effort")] = QString::fromLatin1(to_string(o.effort));
    settings[QStringLiteral("attention")] = o.msa ? QStringLiteral("msa") : QStringLiteral("dense");
    if (o.msa) settings[QStringLiteral("top_k")] = top_k;
    settings[QStringLiteral("n_ctx")] = n_ctx;
    settings[QStringLiteral("model")] = QString::fromStdString(std::filesystem::path(model.file.name()).filename().string());
    settings[QStringLiteral("context_tokens")] = static_cast<qint64>(ts.prefix_tokens);
    settings[QStringLiteral("restored")] = r.restored;
    settings[QStringLiteral("semantic")] = o.embedder != nullptr;
    settings[QStringLiteral("baseline")] = r.baseline;
    if (!r.read_summary.empty()) settings[QStringLiteral("read")] = QString::fromStdString(r.read_summary);
    QJsonArray doc_ids;
    for (DocId id : ids) doc_ids.append(static_cast<qint64>(id));
    settings[QStringLiteral("documents")] = doc_ids;
    settings[QStringLiteral("when")] = QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
    r.settings_json = compact(settings);
    ChatRecord chat;
    chat.question = o.question;
    chat.answer = r.answer.with_markers();
    chat.citations = answer_to_json(r.answer);
    chat.settings = r.settings_json;
    r.chat_id = lib.add_chat(chat);
}

// The library prefill recorded for these documents (any extent), or none.
std::optional<KvCacheRecord> library_prefill_record(Library& lib, const std::string& fingerprint,
                                                    const std::vector<DocId>& ids) {
    std::optional<KvCacheRecord> best;
    for (auto& rec : lib.list_kv_caches()) {
        if (rec.model_fingerprint != fingerprint || rec.documents != ids) continue;
        if (rec.settings.find("\"library_prefill\":true") == std::string::npos) continue;
        if (rec.n_tokens <= 0 || !std::filesystem::exists(rec.path)) continue;
        if (!best || rec.updated_ms > best->updated_ms) best = std::move(rec);
    }
    return best;
}

// Answers from the library's own prefill (complete or partial). Returns false, with r.kv_note
// saying why, when it cannot be used (then the question-specific path runs).
bool ask_from_library_prefill(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb,
                              const std::vector<doc::Document>& docs, const std::vector<DocId>& ids,
                              const std::string& fingerprint, std::chrono::steady_clock::time_point t_start,
                              AskResult& r) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    const auto rec = library_prefill_record(lib, fingerprint, ids);
    if (!rec) return false;
    // The record's context budget (settings "max_tokens") rebuilds the same context.
    const QJsonObject recorded = QJsonDocument::fromJson(QByteArray::fromStdString(rec->settings)).object();
    const int64_t max_tokens = recorded.value(QStringLiteral("max_tokens")).toInteger(kLibraryContextTokens);
    const LibraryContext c = library_context(docs, ids, lib, model, max_tokens);
    if (c.settings != rec->settings) {
        r.kv_note = "the library prefill " + rec->path + " was made for another library context; not used";
        return false;
    }
    const EffortSettings effort = effort_settings(o.effort);
    const int64_t total = static_cast<int64_t>(c.stream.tokens.size());
    const int64_t on_file = static_cast<int64_t>(saved_context_tokens(rec->path).size());
    if (on_file <= 0) {
        r.kv_note = "the library prefill " + rec->path + " could not be read; not used";
        return false;
    }
    const ContextOptions& co = c.builder_options;
    const ContextBuilder builder(*model.tokenizer, *model.chat, co);
    const int64_t budget = o.preselect_tokens > 0 ? o.preselect_tokens : 1024LL << static_cast<int>(o.effort);
    const int64_t q_tokens = static_cast<int64_t>(builder.question_tokens(o.question).size());
    const int64_t probe = static_cast<int64_t>(builder.question_tokens("").size()) + o.probe_tokens;

    // The saved K/V were made under MSA; a dense question (o.msa false) attends all of them
    // (Session::restore accepts a file of another attention), without selections to cite.
    MsaConfig mc = c.msa;
    mc.top_k = effort.top_k;
    MsaAttention* msa = nullptr;
    std::unique_ptr<Attention> attention = make_attention(o.msa, mc, msa);
    SessionOptions so;
    so.kv_block = mc.block_size;
    so.device = "cpu";  // restores a saved context: CPU sessions only (core/runtime/session.h)
    // The file may grow while we read it (a background prefill): leave room for all of it.
    so.n_ctx = static_cast<int>(total + budget + static_cast<int64_t>(c.prepared.closing.size()) +
                                std::max(q_tokens + effort.answer_tokens, probe) + 16);
    Session session(model, so, std::move(attention));

    const auto t_prefill = std::chrono::steady_clock::now();
    status("restoring the library prefill (" + std::to_string(on_file) + " of " + std::to_string(total) + " tokens)");
    try {
        session.restore(rec->path);
    } catch (const Error& e) {
        r.kv_note = std::string("the library prefill was refused (") + e.what() + "); not used";
        return false;
    }
    const auto& have = session.tokens();
    const int64_t n = static_cast<int64_t>(have.size());
    if (n > total || !std::equal(have.begin(), have.end(), c.stream.tokens.begin())) {
        r.kv_note = "the library prefill " + rec->path + " holds other tokens; not used";
        return false;
    }
    r.restored = true;
    r.from_library_prefill = true;
    r.library_tokens = total;
    r.library_saved = n;
    r.plan = c.plan.to_text();

    TokenStream ts;
    if (n == total) {
        ts = c.stream;
        r.read_summary = "all " + thousands(total) + " tokens of the library context (prefilled)";
        if (c.plan.total_planned < c.plan.total_full)
            r.read_summary += "; the context keeps " + thousands(c.plan.total_planned) + " of the library's " +
                              thousands(c.plan.total_full) + " tokens (see the plan)";
        r.kv_note = "restored the library prefill from " + rec->path;
    } else {
        // Partial: the prefilled prefix, then a preselection of what it has not reached yet.
        ts = c.stream.clipped(n);
        const Preselection pre = preselect_units(c.prepared, ts, o.question, budget, *model.tokenizer, o.embedder);
        builder.append(ts, c.prepared, pre.units, &c.plan, true);
        status("prefilling " + std::to_string(ts.prefix_tokens - n) + " tokens of " + std::to_string(pre.units.size()) +
               " preselected units");
        prefill_checked(session, std::span<const int32_t>(ts.tokens).subspan(static_cast<size_t>(n)), o);
        r.prefilled_tokens = ts.prefix_tokens - n;
        r.read_summary = describe_reading(ts, n, total, pre);
        r.kv_note = "restored " + std::to_string(n) + " of " + std::to_string(total) + " library tokens from " + rec->path;
    }
    r.context_tokens = ts.prefix_tokens;
    r.prefill_seconds = since(t_prefill);
    QJsonObject extra;
    extra[QStringLiteral("library_prefill")] = true;
    extra[QStringLiteral("library_tokens")] = static_cast<qint64>(total);
    extra[QStringLiteral("library_prefilled")] = static_cast<qint64>(n);
    answer_after_prefix(lib, model, o, cb, builder, ts, session, msa, effort, ids, so.n_ctx, mc.top_k, extra, t_start, r);
    return true;
}

}  // namespace

AskResult ask(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    const auto t_start = std::chrono::steady_clock::now();
    AskResult r;
    const EffortSettings effort = effort_settings(o.effort);

    std::vector<DocId> ids;
    const std::vector<doc::Document> docs = ready_documents(lib, ids);
    const std::string fingerprint = model_fingerprint(model);
    if (o.use_library_prefill && o.reuse_kv &&
        ask_from_library_prefill(lib, model, o, cb, docs, ids, fingerprint, t_start, r))
        return r;
    std::vector<const doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);

    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::max(2048, model.model->config().n_ctx_train);
    ContextOptions co;
    co.sink_block = o.block_size;
    co.render_px = effort.render_px;
    const ContextBuilder builder(*model.tokenizer, *model.chat, co);
    const PreparedContext prepared = builder.prepare(ptrs);

    // Over budget: keep the units the question's words point at (lexical preselection).
    PlanOptions po;
    {
        const BudgetPlan whole = plan_budget(prepared, n_ctx, effort, po);
        if (whole.total_planned < whole.total_full) {
            std::vector<std::string> texts;
            for (const auto& u : prepared.units) texts.push_back(unit_text(u, *model.tokenizer));
            const LexicalIndex index(texts);
            po.unit_priority.assign(prepared.units.size(), 0.0);
            for (const auto& h : index.rank(o.question, prepared.units.size())) po.unit_priority[h.passage] = h.score;
        }
    }
    const BudgetPlan plan = plan_budget(prepared, n_ctx, effort, po);
    r.plan = plan.to_text();
    if (!plan.fits) throw Error("the context of " + std::to_string(n_ctx) + " tokens is too small for the question and answer");
    const TokenStream ts = builder.assemble(prepared, &plan);
    r.context_tokens = ts.prefix_tokens;
    const int64_t q_size = static_cast<int64_t>(builder.question_tokens(o.question).size());

    // Attention and session.
    MsaConfig mc;
    mc.block_size = o.block_size;
    mc.top_k = effort.top_k;
    if (model.model->config().has_indexer()) {  // the model's own learned indexer selects
        mc = native_msa_config(model.model->config(), mc);
        mc.top_k = effort.top_k;
        mc.block_size = o.block_size;
    }
    MsaAttention* msa = nullptr;
    std::unique_ptr<Attention> attention = make_attention(o.msa, mc, msa);
    SessionOptions so;
    so.n_ctx = static_cast<int>(ts.prefix_tokens + q_size) + effort.answer_tokens + 8;
    so.kv_block = o.block_size;
    Session session(model, so, std::move(attention));

    // The prefix: restored from a saved KV cache of exactly this context, else prefilled (and saved).
    const std::string prefix_hash =
        sha256_hex(std::string_view(reinterpret_cast<const char*>(ts.tokens.data()), ts.tokens.size() * sizeof(int32_t)));
    QJsonObject kv_settings;
    kv_settings[QStringLiteral("attention")] = o.msa ? QStringLiteral("msa") : QStringLiteral("dense");
    kv_settings[QStringLiteral("block")] = o.block_size;
    if (o.msa) kv_settings[QStringLiteral("top_k")] = mc.top_k;
    kv_settings[QStringLiteral("prefix_sha256")] = QString::fromStdString(prefix_hash);
    const std::string kv_key = compact(kv_settings);
    const auto t_prefill = std::chrono::steady_clock::now();
    if (o.reuse_kv) {
        if (auto rec = lib.find_kv_cache(fingerprint, ids, kv_key);
            rec && rec->state == KvCacheState::Complete && std::filesystem::exists(rec->path)) {
            try {
                session.restore(rec->path);
                if (session.tokens() == ts.tokens) {
                    r.restored = true;
                    r.kv_note = "restored the prefilled context from " + rec->path;
                } else {
                    session.reset();
                    r.kv_note = "saved context " + rec->path + " holds other tokens; prefilling again";
                }
            } catch (const Error& e) {
                session.reset();
                r.kv_note = std::string("saved context refused (") + e.what() + "); prefilling again";
            }
        }
    }
    if (!r.restored) {
        status("prefilling " + std::to_string(ts.prefix_tokens) + " context tokens");
        prefill_checked(session, ts.tokens, o);
        r.prefilled_tokens = ts.prefix_tokens;
        if (o.reuse_kv) {
            const std::string path = (lib.kv_dir() / (prefix_hash.substr(0, 24) + ".slkv")).string();
            try {
                session.save(path);
                KvCacheRecord rec;
                if (auto old = lib.find_kv_cache(fingerprint, ids, kv_key)) rec.id = old->id;
                rec.path = path;
                rec.model_fingerprint = fingerprint;
                rec.documents = ids;
                rec.n_tokens = ts.prefix_tokens;
                rec.total_tokens = ts.prefix_tokens;
                rec.settings = kv_key;
                rec.state = KvCacheState::Complete;
                lib.save_kv_cache(rec);
                r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("saved the prefilled context to ") + path;
            } catch (const Error& e) {
                r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("could not save the context: ") + e.what();
            }
        }
    }
    r.prefill_seconds = since(t_prefill);

    answer_after_prefix(lib, model, o, cb, builder, ts, session, msa, effort, ids, n_ctx, mc.top_k, {}, t_start, r);
    return r;
}

}  // namespace sl::app
