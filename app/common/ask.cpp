#include "app/common/ask.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <chrono>
#include <filesystem>

#include "app/common/answer_json.h"
#include "core/answer/citations.h"
#include "core/answer/selection_collector.h"
#include "core/answer/verify.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/context/lexical_rank.h"
#include "core/library/library.h"
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

AskResult ask(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    AskResult r;
    const EffortSettings effort = effort_settings(o.effort);

    std::vector<DocId> ids;
    const std::vector<doc::Document> docs = ready_documents(lib, ids);
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
            for (const auto& u : prepared.units) {
                std::string t;
                for (const auto& it : u.items)
                    if (it.kind == SpanKind::Text) t += model.tokenizer->decode(it.tokens) + " ";
                texts.push_back(std::move(t));
            }
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
    const std::vector<int32_t> q = builder.question_tokens(o.question);

    // Attention and session.
    MsaConfig mc;
    mc.block_size = o.block_size;
    mc.top_k = effort.top_k;
    std::unique_ptr<Attention> attention;
    MsaAttention* msa = nullptr;
    if (o.msa) {
        auto m = std::make_unique<MsaAttention>(mc);
        msa = m.get();
        attention = std::move(m);
    } else {
        attention = std::make_unique<DenseAttention>();
    }
    SessionOptions so;
    so.n_ctx = static_cast<int>(ts.prefix_tokens + static_cast<int64_t>(q.size())) + effort.answer_tokens + 8;
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
    const std::string fingerprint = model_fingerprint(model);
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
    std::string saved_path;  // a file holding exactly the prefix, when there is one
    if (r.restored) saved_path = lib.find_kv_cache(fingerprint, ids, kv_key)->path;
    if (!r.restored) {
        status("prefilling " + std::to_string(ts.prefix_tokens) + " context tokens");
        session.prefill(ts.tokens);
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
                saved_path = path;
                r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("saved the prefilled context to ") + path;
            } catch (const Error& e) {
                r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("could not save the context: ") + e.what();
            }
        }
    }
    r.prefill_seconds = since(t_prefill);

    // The positional baseline: a probe decoded after the prefix, then the prefix restored.
    std::vector<float> baseline;
    if (o.baseline && msa && !saved_path.empty()) {
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
            });
            SelectionCollector::detach(*msa);
            baseline = probe.mean_block_mass();
            session.restore(saved_path);
            msa->invalidate();
            if (session.tokens() != ts.tokens) throw Error(saved_path + ": restored context differs from the prefix");
            r.baseline = true;
        } catch (const Error& e) {
            SelectionCollector::detach(*msa);
            baseline.clear();
            status(std::string("positional baseline skipped: ") + e.what());
            session.reset();
            msa->invalidate();
            session.prefill(ts.tokens);
        }
    }

    // The question turn, then the answer with the collector recording MSA's selections.
    SelectionCollector collector(ts, o.block_size);
    if (msa) collector.attach(*msa);
    session.prefill(q);
    GenerateOptions gen;
    gen.max_tokens = effort.answer_tokens;
    gen.sampling.greedy = true;
    gen.stop = model.chat->stop_strings();
    const auto t_decode = std::chrono::steady_clock::now();
    session.generate(gen, [&](std::string_view t) {
        collector.on_text(t);
        if (cb.on_text) cb.on_text(t);
        return true;
    });
    r.decode_seconds = since(t_decode);
    if (msa) SelectionCollector::detach(*msa);

    CiteOptions cite_options;
    if (r.baseline) cite_options.baseline = &baseline;
    r.answer = cite(collector, *model.tokenizer, cite_options);
    r.answer.question = o.question;
    verify(r.answer, o.embedder);

    // The chat, stored.
    QJsonObject settings;
    settings[QStringLiteral("effort")] = QString::fromLatin1(to_string(o.effort));
    settings[QStringLiteral("attention")] = o.msa ? QStringLiteral("msa") : QStringLiteral("dense");
    if (o.msa) settings[QStringLiteral("top_k")] = mc.top_k;
    settings[QStringLiteral("n_ctx")] = n_ctx;
    settings[QStringLiteral("model")] = QString::fromStdString(std::filesystem::path(model.file.name()).filename().string());
    settings[QStringLiteral("context_tokens")] = static_cast<qint64>(ts.prefix_tokens);
    settings[QStringLiteral("restored")] = r.restored;
    settings[QStringLiteral("semantic")] = o.embedder != nullptr;
    settings[QStringLiteral("baseline")] = r.baseline;
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
    return r;
}

}  // namespace sl::app
