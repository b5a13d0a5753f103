#include "core/ask/ask.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <span>
#include <filesystem>
#include <map>
#include <set>

#include "core/answer/answer_json.h"
#include "core/answer/citations.h"
#include "core/answer/selection_collector.h"
#include "core/answer/think_filter.h"
#include "core/answer/verify.h"
#include "core/ask/answer_guard.h"
#include "core/ask/ask_parts.h"
#include "core/ask/attention_choice.h"
#include "core/ask/context_spec.h"
#include "core/ask/kv_budget.h"
#include "core/ask/library_context.h"
#include "core/ask/question_cache.h"
#include "core/ask/unit_embeddings.h"
#include "core/ask/unit_ranking.h"
#include "core/ask/visual_cache.h"
#include "core/ask/warm_context.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/kvcache/kv_file.h"
#include "core/util/mapped_file.h"
#include "core/context/preselect.h"
#include "core/library/library.h"
#include "core/model/llama_model.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/file_identity.h"
#include "core/util/json_writer.h"
#include "core/util/sha256.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"

namespace sl {

using Clock = AskClock;

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

// The effort's settings, with the answer budget doubled for a reasoning model (its template writes
// <think> blocks): the thinking comes out of the same generation, before the answer.
EffortSettings answer_effort(const AskOptions& o, const LoadedModel& model) {
    EffortSettings e = effort_settings(o.effort);
    if (model.chat->thinks()) e.answer_tokens *= 2;
    return e;
}

void check_cancel(const AskOptions& o) {
    if (o.cancel && o.cancel->load()) throw Cancelled("the question was cancelled");
}

// Prefill in chunks, checking the cancel flag between them and reporting progress. With `vis`,
// `tokens` are the stream's positions from `pos0` on and image positions take its rows
// (prefill_stream, visual_context.h).
void prefill_checked(Session& session, std::span<const int32_t> tokens, const AskOptions& o, const AskCallbacks& cb,
                     VisualEmbeddings* vis = nullptr, int64_t pos0 = 0, bool bidirectional = false) {
    constexpr size_t kChunk = 512;
    const auto t0 = Clock::now();
    prefill_stream(session, tokens, pos0, vis, bidirectional, kChunk, [&] { check_cancel(o); }, [&](size_t done) {
        if (cb.on_progress) cb.on_progress(static_cast<int64_t>(done), static_cast<int64_t>(tokens.size()), since(t0));
    });
}

// After the prefix (ts) is in the session: the positional baseline, the question turn, the
// streamed answer with the collector recording MSA's selections, citations and the stored chat.
void answer_after_prefix(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb,
                         const ContextBuilder& builder, const TokenStream& ts, const std::vector<UnitEvidence>& evidence,
                         Session& session, MsaAttention* msa, const EffortSettings& effort,
                         const std::vector<DocId>& ids, int n_ctx, const ContextSpec& spec, Clock::time_point t_start,
                         AskResult& r) {
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
        } catch (const DamagedContextError&) {  // ask() drops the file and asks again
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
    // Detached however this ends (a stopped question too): the session may outlive the collector
    // (AskOptions::warm keeps it for the next question).
    struct Detach {
        MsaAttention* msa;
        ~Detach() {
            if (msa) SelectionCollector::detach(*msa);
        }
    } detach_collector{msa};
    prefill_checked(session, q, o, {});
    GenerateOptions gen;
    gen.max_tokens = effort.answer_tokens;
    gen.sampling.greedy = o.temperature <= 0;
    if (o.temperature > 0) gen.sampling.temperature = o.temperature;
    gen.stop = model.chat->stop_strings();
    AnswerGuard guard;
    // A reasoning model's thinking stays out of the answer, the chat and the report; the attention
    // of its steps counts towards the first answer text's citations.
    ThinkFilter think(model.chat->opens_thinking());
    const bool thinks = model.chat->thinks();
    auto visible = [&](std::string_view t) {
        if (t.empty()) return true;
        if (r.first_token_seconds == 0) r.first_token_seconds = since(t_start);
        collector.on_text(t);
        const bool go_on = guard.on_text(t);
        if (cb.on_text) cb.on_text(t);
        return go_on;
    };
    const auto t_decode = Clock::now();
    const GenerateStats gs = session.generate(gen, [&](std::string_view t) {
        return thinks ? visible(think.feed(t)) : visible(t);
    }, o.cancel);
    if (thinks) visible(think.finish());
    r.decode_seconds = since(t_decode);
    if (msa) SelectionCollector::detach(*msa);
    check_cancel(o);

    // Answers that end well: a loop cut back before it began, a budget cut back to a sentence end.
    std::string stop = gs.stop_reason;
    bool cut = false;
    if (guard.looped()) {
        collector.truncate_text(guard.keep());
        stop = "repetition";
        cut = true;
    } else if (stop == "max tokens" || stop == "context full") {
        const size_t keep = AnswerGuard::last_sentence_end(collector.text());
        if (keep > 0 && keep < collector.text().size()) collector.truncate_text(keep);
        cut = true;
    }

    CiteOptions cite_options;
    if (r.baseline) cite_options.baseline = &baseline;
    cite_options.evidence = &evidence;
    cite_options.embedder = o.embedder;
    r.answer = cite(collector, *model.tokenizer, cite_options);
    r.answer.question = o.question;
    r.answer.stop_reason = stop;
    r.answer.cut = cut;

    // The chat, stored.
    store_chat(lib, o, ts, ids, r, [&](JsonWriter& w) {
        w.key("attention"), w.value(o.msa ? "msa" : "dense");
        if (o.msa) w.key("top_k"), w.value(spec.top_k), w.key("mode"), w.value(spec.scoring);
        w.key("n_ctx"), w.value(n_ctx);
        w.key("model"), w.value(std::filesystem::path(model.file.name()).filename().string());
        if (!spec.vision.empty()) w.key("vision"), w.value(spec.vision);
    });
}

// What a warm session (warm_context.h) must share with the question's to be taken: the saved file
// as it is now, the model object and file, the attention and the session's settings.
std::string warm_key_of(const std::string& path, const std::string& fingerprint, const LoadedModel& model,
                        const ContextSpec& spec, const SessionOptions& so) {
    const std::string file = file_identity(path);
    if (file.empty()) return {};
    char at[32];
    std::snprintf(at, sizeof at, "%p", static_cast<const void*>(&model));
    return file + "\n" + fingerprint + "@" + at + "\n" + spec.encode() + "\n" + so.device + "|" +
           std::to_string(so.n_threads) + "|" + std::to_string(so.kv_block) + "|" + std::to_string(so.device_kv_budget_bytes) +
           "|" + std::to_string(static_cast<int>(so.kv_type)) + "|" + std::to_string(so.kv_budget_bytes);
}

// Hands a session to the warm context when the scope ends, once armed (it holds the saved prefix):
// normally or by a cancellation (Cancelled), not by another error, and not when its device failed
// during the question (it went on on the CPU: the next question tries the device again).
struct KeepWarm {
    WarmContext* warm;
    WarmSession& session;
    const std::atomic<bool>* cancel;
    bool armed = false;
    bool complete = false;
    bool on_gpu = false;  // where it ran when armed
    int exceptions = std::uncaught_exceptions();

    ~KeepWarm() {
        if (!warm || !armed) return;
        if (std::uncaught_exceptions() > exceptions && !(cancel && cancel->load())) return;
        if (session.session->on_gpu() != on_gpu) return;
        warm->keep(std::move(session), complete);
    }
};

// The library prefill recorded for these documents (any extent), or none.
std::optional<KvCacheRecord> library_prefill_record(Library& lib, const std::string& fingerprint,
                                                    const std::vector<DocId>& ids) {
    std::optional<KvCacheRecord> best;
    for (auto& rec : lib.list_kv_caches()) {
        if (rec.model_fingerprint != fingerprint || rec.documents != ids) continue;
        const auto spec = ContextSpec::decode(rec.settings);
        if (!spec || !spec->library_prefill) continue;
        if (rec.n_tokens <= 0 || !std::filesystem::exists(rec.path)) continue;
        if (!best || rec.updated_ms > best->updated_ms) best = std::move(rec);
    }
    return best;
}

// kv/ trimmed to the cap, `keep` (the contexts this question used) kept, `exempt` (the library
// prefill it read) not counted.
void trim_cache(Library& lib, const AskOptions& o, const std::vector<std::string>& keep, AskResult& r,
                const std::vector<std::string>& exempt = {}) {
    if (o.kv_cap_bytes <= 0) return;
    const KvTrim t = trim_kv_folder(lib, o.kv_cap_bytes, keep, exempt);
    if (t.removed > 0)
        r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("removed ") + std::to_string(t.removed) +
                     " least recently used context file(s) (" + thousands(t.freed >> 20) + " MiB) to keep kv/ under " +
                     thousands(o.kv_cap_bytes >> 20) + " MiB";
}

// Answers from the library's own prefill (complete or partial). Returns false, with r.kv_note
// saying why, when it cannot be used (then the question path runs).
bool ask_from_library_prefill(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb,
                              const std::vector<doc::Document>& docs, const std::vector<DocId>& ids,
                              const std::string& fingerprint, Clock::time_point t_start, AskResult& r) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    auto rec = library_prefill_record(lib, fingerprint, ids);
    if (!rec) return false;
    // The record's context budget rebuilds the same context.
    const auto recorded = ContextSpec::decode(rec->settings);
    const int64_t max_tokens = recorded && recorded->max_tokens > 0 ? recorded->max_tokens : kLibraryContextTokens;
    const LibraryContext c = library_context(docs, ids, lib, model, max_tokens);
    if (!recorded || !(c.spec == *recorded)) {
        r.kv_note = "the library prefill " + rec->path + " was made for another library context; not used";
        return false;
    }
    const EffortSettings effort = answer_effort(o, model);
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
    // (Session::restore accepts a file of another attention), without selections.
    MsaConfig mc = c.msa;
    mc.top_k = effort.top_k;
    ContextSpec spec = c.spec;
    spec.top_k = mc.top_k;
    spec.msa = o.msa;
    SessionOptions so;
    so.n_threads = o.threads;
    so.kv_block = mc.block_size;
    so.device = o.device;
    so.device_kv_budget_bytes = o.device_kv_budget_bytes;
    so.kv_budget_bytes = o.kv_budget_bytes;
    so.needs.save_restore = true;  // restores the library's prefill (and may truncate it)
    so.needs.truncate = true;
    // The file may grow while we read it (a background prefill): leave room for all of it. Rounded
    // up, so that a warm session (warm_context.h) takes the next question of another length.
    const int64_t need = total + budget + static_cast<int64_t>(c.prepared.closing.size()) +
                         std::max(q_tokens + effort.answer_tokens, probe) + 16;
    so.n_ctx = static_cast<int>((need + 1023) / 1024 * 1024);

    // The session: the one the last question left in memory when it was made from this very file
    // the same way, else a new one restored from the file.
    const std::string warm_key = o.warm ? warm_key_of(rec->path, fingerprint, model, spec, so) : std::string();
    WarmSession w;
    if (!warm_key.empty()) w = o.warm->take(warm_key, so.n_ctx);
    bool warm = w.session != nullptr;
    if (!warm) {
        w.session = std::make_unique<Session>(model, so, make_attention(o.msa, mc, w.msa));
        w.key = warm_key;
    }
    Session& session = *w.session;
    MsaAttention* msa = w.msa;
    r.device = session.device_reason();
    // Handed back to the owner's warm context once it holds the saved prefix: after the answer, or
    // when the question was stopped (the next question cuts it back); another error drops it.
    KeepWarm keep_warm{warm_key.empty() ? nullptr : o.warm, w, o.cancel};

    const UnitRanking ranking = rank_for(c.prepared, lib, *model.tokenizer, o, cb);
    const auto t_prefill = Clock::now();
    // The prefix when the first n tokens are prefilled (clipped to them), and the best ranked units
    // it has not read, to go after it, then the closing.
    const int64_t body = total - static_cast<int64_t>(c.prepared.closing.size());
    auto preselect = [&](int64_t n, TokenStream& ts) {
        ts = n == total ? c.stream : c.stream.clipped(n);
        std::set<std::pair<int, int>> read;
        for (const auto& u : ts.units)
            if (u.end < ts.prefix_tokens || n == total) read.insert({u.source, u.unit});
        Preselection pre;
        int64_t left = budget;
        for (size_t i : ranking.order) {
            const auto& m = c.prepared.units[i].meta;
            if (read.count({m.source, m.unit})) continue;
            ++pre.candidates;
            if (ranking.score[i] <= 0) continue;
            const int64_t t = c.prepared.units[i].tokens();
            if (t > left) continue;
            left -= t;
            pre.units.push_back(i);
            pre.tokens += t;
        }
        std::sort(pre.units.begin(), pre.units.end());
        pre.semantic = ranking.semantic;
        return pre;
    };
    int64_t n = w.saved;
    TokenStream ts;
    Preselection pre;
    if (warm) {
        // Taken only when it still holds the saved tokens this question reads: all of them, or
        // those before the closing when units go after them (the last question may have cut it
        // back further); else it is restored from the file after all.
        pre = preselect(n, ts);
        const int64_t reads = n == total && pre.units.empty() ? total : n == total ? body : n;
        const auto& have = session.tokens();
        const int64_t held = std::min<int64_t>(static_cast<int64_t>(have.size()), reads);
        warm = held == reads && std::equal(have.begin(), have.begin() + held, c.stream.tokens.begin());
    }
    if (warm) {
        status("the library prefill is still in memory (" + thousands(n) + " of " + thousands(total) + " tokens)");
    } else {
        status("restoring the library prefill (" + thousands(on_file) + " of " + thousands(total) + " tokens)");
        try {
            session.restore(rec->path);
        } catch (const DamagedContextError&) {  // ask() drops the file and asks again
            throw;
        } catch (const Error& e) {
            r.kv_note = std::string("the library prefill was refused (") + e.what() + "); not used";
            return false;
        }
        const auto& have = session.tokens();
        n = static_cast<int64_t>(have.size());
        if (n > total || !std::equal(have.begin(), have.end(), c.stream.tokens.begin())) {
            r.kv_note = "the library prefill " + rec->path + " holds other tokens; not used";
            return false;
        }
        w.saved = n;
        pre = preselect(n, ts);
    }
    keep_warm.armed = true;
    keep_warm.complete = n == total;
    keep_warm.on_gpu = session.on_gpu();
    lib.save_kv_cache(*rec);  // touched: recently used
    r.restored = true;
    r.warm = warm;
    r.from_library_prefill = true;
    r.library_tokens = total;
    r.library_saved = n;
    r.plan = c.plan.to_text();
    const std::string from_where = warm ? "kept in memory from the last question (" + rec->path + ")" : "from " + rec->path;
    std::vector<std::string> used{rec->path};  // kept by kv/'s cap
    if (cb.on_plan) cb.on_plan(r.plan);
    // A warm session is cut back to the saved part this question reads (`from`), or to the whole
    // prefix when it holds all of it (the last question read the same units), and the rest
    // prefilled: the same calls as after a restore, so the same K/V and selections (cutting at
    // another point would change a query block's calls, and MSA shares a selection per block).
    auto holds_prefix = [&](const TokenStream& t) {
        const auto& have = session.tokens();
        return have.size() >= t.tokens.size() && std::equal(t.tokens.begin(), t.tokens.end(), have.begin());
    };
    auto continue_warm = [&](const TokenStream& t, int64_t from) {
        const auto& have = session.tokens();
        const auto [a, b] = std::mismatch(have.begin(), have.end(), t.tokens.begin(), t.tokens.end());
        const int64_t shared = a - have.begin();
        const int64_t kept = shared >= t.prefix_tokens ? t.prefix_tokens : std::min(shared, from);
        session.truncate(kept);
        if (kept < t.prefix_tokens) {
            status("prefilling " + thousands(t.prefix_tokens - kept) + " tokens after the " + thousands(kept) +
                   " kept in memory");
            prefill_checked(session, std::span<const int32_t>(t.tokens).subspan(static_cast<size_t>(kept)), o, cb);
        }
        r.prefilled_tokens = t.prefix_tokens - kept;
        return kept;
    };
    if (n == total && pre.units.empty()) {
        r.read_summary = "all " + thousands(total) + " tokens of the library context (prefilled)";
        r.kv_note = "restored the library prefill " + from_where;
        if (warm) continue_warm(ts, total);  // the last question and its answer cut off
    } else {
        if (n == total) {
            // Complete: reopen the context before its closing, to append after the last unit.
            if (!warm) session.truncate(body);
            ts = c.stream.clipped(body);
        }
        const int64_t from = ts.prefix_tokens;
        builder.append(ts, c.prepared, pre.units, &c.plan, true);
        r.read_summary = describe_reading(ts, std::min(n, from), total, pre);
        r.kv_note = "restored " + thousands(n) + " of " + thousands(total) + " library tokens " + from_where;
        // The question's part: restored when this context was asked before (a delta over the
        // library prefill), else prefilled and saved so. A warm session that holds all of it (the
        // same units as the last question) prefills nothing; one that lacks units prefills them on
        // a device (milliseconds), while on the CPU a saved context of this question restores faster
        // than its units prefill (at 100K tokens ~1 s against ~6 s): cut back to the saved part,
        // the question's own part is restored onto it (Session::restore_delta: neither the library
        // prefill's file nor its block index is read again).
        ContextSpec qspec = spec;
        qspec.library_prefill = false;
        qspec.max_tokens = 0;
        qspec.prefix_sha256 =
            sha256_hex(std::string_view(reinterpret_cast<const char*>(ts.tokens.data()), ts.tokens.size() * sizeof(int32_t)));
        QuestionCacheNote cache;
        cache.used.push_back(rec->path);
        const bool prefill_warm = warm && (session.on_gpu() || holds_prefix(ts));
        if (warm && !prefill_warm) session.truncate(from);
        if (prefill_warm) {
            const int64_t kept = continue_warm(ts, from);
            if (o.reuse_kv && from < ts.prefix_tokens && kept < ts.prefix_tokens) {
                const ContextBase base{rec->path, from};
                save_question_context(lib, session, fingerprint, ids, qspec, &base, cache);
            }
            if (!cache.note.empty()) r.kv_note += "; " + cache.note;
        } else if (o.reuse_kv && from < ts.prefix_tokens &&
                   restore_question_context(lib, session, fingerprint, ids, qspec, ts.tokens, cache,
                                            warm ? rec->path : std::string())) {
            if (cache.onto) {
                r.kv_note += "; " + cache.note;
            } else {
                r.kv_note = cache.note;
                r.warm = false;  // the context came from the files after all
            }
        } else {
            if (session.tokens().empty()) {  // a failed restore of the question's file left it empty
                session.restore(rec->path, from);
                if (r.warm) {  // what was held is gone: read from the file after all
                    r.warm = false;
                    r.kv_note = "restored " + thousands(n) + " of " + thousands(total) + " library tokens from " + rec->path;
                }
            }
            status("prefilling " + thousands(ts.prefix_tokens - from) + " tokens of " + std::to_string(pre.units.size()) +
                   " units ranked for the question");
            prefill_checked(session, std::span<const int32_t>(ts.tokens).subspan(static_cast<size_t>(from)), o, cb);
            r.prefilled_tokens = ts.prefix_tokens - from;
            if (o.reuse_kv && from < ts.prefix_tokens) {
                const ContextBase base{rec->path, from};
                save_question_context(lib, session, fingerprint, ids, qspec, &base, cache);
            }
            if (!cache.note.empty()) r.kv_note += "; " + cache.note;
        }
        used = cache.used;
    }
    r.context_tokens = ts.prefix_tokens;
    r.prefill_seconds = since(t_prefill);
    r.attention = o.msa ? "msa " + spec.scoring + ", top-k " + std::to_string(spec.top_k) : "dense";
    const std::vector<UnitEvidence> evidence = evidence_of(ts, c.prepared, ranking);
    answer_after_prefix(lib, model, o, cb, builder, ts, evidence, session, msa, effort, ids, so.n_ctx, spec, t_start, r);
    r.device = session.device_reason();  // again: a device that failed mid-answer handed over to the CPU
    trim_cache(lib, o, used, r, {rec->path});
    return true;
}

}  // namespace

namespace {

AskResult ask_once(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    const auto t_start = Clock::now();
    AskResult r;
    const EffortSettings effort = answer_effort(o, model);

    std::vector<DocId> ids;
    std::vector<doc::Document> docs = ready_documents(lib, ids);
    const std::string fingerprint = model_fingerprint(model);
    const VisionModel* vision = o.vision.model;
    if (vision) {
        check_vision_fits_lm(vision->config, model.model->config().d_model, "the vision tower");
        add_page_renders(docs);
    }
    if (!vision && o.use_library_prefill && o.reuse_kv &&
        ask_from_library_prefill(lib, model, o, cb, docs, ids, fingerprint, t_start, r))
        return r;
    // The question path makes a session of its own: a session held for the library prefill goes
    // first (its memory, on the device too).
    if (o.warm) o.warm->clear();
    std::vector<const doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);

    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::max(2048, model.model->config().n_ctx_train);
    ContextOptions co;
    co.sink_block = o.block_size;
    co.render_px = effort.render_px;
    if (vision) co.image_sequence = image_sequence_for(*vision, *model.tokenizer);
    const ContextBuilder builder(*model.tokenizer, *model.chat, co);
    status("reading the library (" + std::to_string(docs.size()) + " documents)");
    const PreparedContext prepared = builder.prepare(ptrs);

    // Over budget: the units ranked best for the question, across the whole library.
    PlanOptions po;
    const BudgetPlan whole = plan_budget(prepared, n_ctx, effort, po);
    const bool question_specific = whole.total_planned < whole.total_full;
    UnitRanking ranking = rank_for(prepared, lib, *model.tokenizer, o, cb);
    if (question_specific) {
        po.unit_priority = ranking.score;
        po.global = true;
    }
    const BudgetPlan plan = question_specific ? plan_budget(prepared, n_ctx, effort, po) : whole;
    r.plan = plan.to_text();
    if (!plan.fits) throw Error("the context of " + std::to_string(n_ctx) + " tokens is too small for the question and answer");
    if (cb.on_plan) cb.on_plan(r.plan);
    const TokenStream ts = builder.assemble(prepared, &plan);
    r.context_tokens = ts.prefix_tokens;
    if (question_specific) r.read_summary = describe_ranked(ts, prepared.units.size(), 0);
    const int64_t q_size = static_cast<int64_t>(builder.question_tokens(o.question).size());

    // Attention and session.
    const int64_t longest = ts.prefix_tokens + q_size + effort.answer_tokens + 8;
    const AttentionChoice att = choose_attention(model.model->config(), longest, o.effort, o.block_size);
    MsaAttention* msa = nullptr;
    std::unique_ptr<Attention> attention = make_attention(o.msa, att.config, msa);
    const bool images =
        vision && std::find(ts.tokens.begin(), ts.tokens.end(), LlamaModel::kEmbeddingToken) != ts.tokens.end();
    SessionOptions so;
    so.n_threads = o.threads;
    so.n_ctx = static_cast<int>(longest);
    so.kv_block = o.block_size;
    so.device = o.device;
    so.device_kv_budget_bytes = o.device_kv_budget_bytes;
    so.kv_budget_bytes = o.kv_budget_bytes;
    so.needs.bidirectional = images && vision->config.gemma3();  // its image runs attend both ways
    so.needs.truncate = true;                // the positional baseline's probe
    so.needs.save_restore = o.reuse_kv;      // the question cache
    Session session(model, so, std::move(attention));
    r.device = session.device_reason();
    r.attention = o.msa ? "msa " + att.mode + ", top-k " + std::to_string(att.config.top_k) : "dense";
    std::unique_ptr<VisionEncoder> encoder;
    std::unique_ptr<VisualCache> visual_cache;
    std::unique_ptr<VisualEmbeddings> vis;
    if (images) {
        encoder = std::make_unique<VisionEncoder>(*vision, session.pool());
        visual_cache = std::make_unique<VisualCache>(lib.dir() / "vision");
        vis = std::make_unique<VisualEmbeddings>(ts, docs, o.vision, *encoder, *model.tokenizer, effort.render_px,
                                                 visual_cache.get());
        r.image_visuals = vis->visuals();
        for (const int32_t t : ts.tokens) r.image_positions += t == LlamaModel::kEmbeddingToken ? 1 : 0;
    }

    // The prefix: restored from a saved KV cache of exactly this context, else prefilled from
    // where it parts from the saved whole context it shares the most with, and saved (a delta over
    // that one: question_cache.h). The same question asked again, as the quickstart does, restores.
    ContextSpec spec;
    spec.msa = o.msa;
    spec.block = o.block_size;
    spec.top_k = att.config.top_k;
    std::string hashed(reinterpret_cast<const char*>(ts.tokens.data()), ts.tokens.size() * sizeof(int32_t));
    if (images) {
        // The image positions' K/V depend on the tower and the render size, not only the tokens.
        spec.vision = o.vision.identity + "@" + std::to_string(effort.render_px);
        hashed += "\nvision " + spec.vision;
    }
    spec.prefix_sha256 = sha256_hex(hashed);
    QuestionCacheNote cache;
    const auto t_prefill = Clock::now();
    if (o.reuse_kv) r.restored = restore_question_context(lib, session, fingerprint, ids, spec, ts.tokens, cache);
    if (!r.restored) {
        std::optional<ContextBase> base;
        if (o.reuse_kv) base = find_context_base(lib, fingerprint, ids, spec, ts.tokens, o.block_size);
        int64_t from = 0;
        if (base) {
            try {
                session.restore(base->path, base->shared);  // the base may be longer than this context
                from = base->shared;
                cache.add("reused the first " + thousands(from) + " tokens from " + base->path);
            } catch (const DamagedContextError&) {  // ask() drops the file and asks again
                throw;
            } catch (const Error& e) {
                session.reset();
                cache.add(std::string("could not reuse ") + base->path + " (" + e.what() + ")");
                base.reset();
            }
        }
        status("prefilling " + thousands(ts.prefix_tokens - from) + " context tokens");
        // Gemma 3's image runs attend both ways (MSA attends such a run exactly: msa_attention.h).
        prefill_checked(session, std::span<const int32_t>(ts.tokens).subspan(static_cast<size_t>(from)), o, cb, vis.get(),
                        from, true);
        r.prefilled_tokens = ts.prefix_tokens - from;
        if (o.reuse_kv) save_question_context(lib, session, fingerprint, ids, spec, base ? &*base : nullptr, cache);
    }
    r.kv_note = cache.note;
    r.prefill_seconds = since(t_prefill);
    if (vision) {
        if (!vis) {
            r.vision_note = "vision: no visual of the context entered as image tokens (pages of text are read as text)";
        } else {
            r.images_encoded = vis->encoded();
            r.encode_seconds = vis->encode_seconds();
            char buf[160];
            std::snprintf(buf, sizeof buf, "vision: %d visuals as %s image positions; %d encoded in %.1f s, %d from the cache",
                          r.image_visuals, thousands(r.image_positions).c_str(), r.images_encoded, r.encode_seconds,
                          vis->from_cache());
            r.vision_note = buf;
            if (r.restored) r.vision_note += " (the saved context holds them)";
            for (const auto& n : vis->notes()) r.vision_note += "; " + n;
        }
        if (o.use_library_prefill && o.reuse_kv) r.kv_note += (r.kv_note.empty() ? "" : "; ") + std::string("the library prefill is text only: not used with a vision tower");
    }

    const std::vector<UnitEvidence> evidence = evidence_of(ts, prepared, ranking);
    answer_after_prefix(lib, model, o, cb, builder, ts, evidence, session, msa, effort, ids, n_ctx, spec, t_start, r);
    r.device = session.device_reason();  // again: a device that failed mid-answer handed over to the CPU
    // The library's own prefill for these documents is not this question's to evict.
    std::vector<std::string> exempt;
    if (auto lp = library_prefill_record(lib, fingerprint, ids)) exempt.push_back(lp->path);
    trim_cache(lib, o, cache.used, r, exempt);
    return r;
}

// A saved context found damaged (DamagedContextError) goes: its file — when it still is the
// damaged one (a prefill may have written it anew since) — and its library record. Returns what
// was done.
std::string drop_damaged(Library& lib, const DamagedContextError& e) {
    bool damaged = true;
    try {
        const MappedFile map(e.path());
        const KvFileContents c = parse_kv_file(map.bytes(), e.path(), KvVerify::Headers);
        damaged = !kv_page_intact(map.bytes(), c, e.layer(), e.block());
    } catch (const Error&) {
        // unreadable or gone: nothing of it is usable
    }
    if (!damaged) return "the saved context " + e.path() + " was damaged when read and has been written anew since";
    std::error_code ec;
    std::filesystem::remove(e.path(), ec);
    for (const KvCacheRecord& rec : lib.list_kv_caches())
        if (std::filesystem::path(rec.path).lexically_normal() == std::filesystem::path(e.path()).lexically_normal())
            lib.remove_kv_cache(rec.id);
    return "removed the damaged saved context " + e.path();
}

}  // namespace

AskResult ask(Library& lib, const LoadedModel& model, const AskOptions& o, const AskCallbacks& cb) {
    // A saved context's pages are checked when first read (Session::restore), so a damaged one
    // shows during the question: it goes (every later question would read it again), and the
    // question is asked once more from what is left, or prefilled afresh — unless part of the
    // answer was streamed already (with MSA a decode step may be the first to read a block): then
    // the error ends this answer, and the next question starts clean.
    bool streamed = false;
    AskCallbacks first = cb;
    if (cb.on_text)
        first.on_text = [&](std::string_view t) {
            streamed = true;
            cb.on_text(t);
        };
    try {
        return ask_once(lib, model, o, first);
    } catch (const DamagedContextError& e) {
        if (o.warm) o.warm->clear();
        const std::string dropped = drop_damaged(lib, e);
        if (streamed) throw DamagedContextError(e.path(), e.layer(), e.block(), std::string(e.what()) + "; " + dropped + ": ask again");
        if (cb.on_status) cb.on_status(std::string(e.what()) + "; " + dropped + ", answering again");
        AskResult r = ask_once(lib, model, o, cb);
        r.kv_note = dropped + " (" + e.what() + ")" + (r.kv_note.empty() ? "" : "; " + r.kv_note);
        return r;
    }
}

}  // namespace sl
