#include "core/ask/remote_ask.h"

#include <algorithm>
#include <cmath>

#include "core/answer/selection_collector.h"
#include "core/answer/think_filter.h"
#include "core/ask/answer_guard.h"
#include "core/ask/ask_parts.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/context/preselect.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/remote/chat_engine.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/json_writer.h"

namespace sl {

namespace {

constexpr double kTokenMargin = 1.05;     // over the server's measured ratio
constexpr double kUnknownRatio = 1.25;    // no tokenize endpoint: the local count x this
constexpr int64_t kDefaultRemoteCtx = 4096;  // when the server does not say (llama-cpp-python, Ollama)
constexpr int64_t kTemplateTokens = 256;  // the server's chat template around the messages

// Remote tokens per local token, from the server's count of a sample of the library's text.
double token_ratio(ChatEngine& engine, const Tokenizer& tok, const std::vector<std::string>& texts, std::string& note) {
    std::string sample;
    for (const auto& t : texts) {
        if (sample.size() > 16000) break;
        sample += t;
        sample += "\n";
    }
    if (sample.size() < 200) {
        note = "too little text to measure the server's tokens; estimated at 1.25 x the local count";
        return kUnknownRatio;
    }
    const auto remote = engine.count_tokens(sample);
    if (!remote || *remote <= 0) {
        note = "the server has no tokenize endpoint; its tokens estimated at 1.25 x the local count";
        return kUnknownRatio;
    }
    const double local = static_cast<double>(tok.encode(sample, false, false).size());
    const double r = std::clamp(static_cast<double>(*remote) / std::max(1.0, local), 0.25, 4.0);
    char buf[160];
    std::snprintf(buf, sizeof buf, "the server's tokenizer counts %.2f of its tokens per local token (margin %.0f%%)", r,
                  (kTokenMargin - 1) * 100);
    note = buf;
    return r * kTokenMargin;
}

std::string stop_reason_of(const std::string& finish) {
    if (finish == "length") return "max tokens";
    if (finish == "stop" || finish.empty()) return "eos";
    return finish;
}

}  // namespace

std::vector<ChatMessage> remote_messages(const std::string& instructions, const TokenStream& ts,
                                         const std::vector<std::string>& texts, const std::string& question) {
    std::string system = instructions + "\n\n";
    for (size_t u = 0; u < ts.units.size(); ++u) {
        if (ts.units[u].begin >= ts.prefix_tokens || u >= texts.size()) continue;
        system += "[" + ts.units[u].locator + "]\n" + texts[u] + "\n\n";
    }
    system += "(End of the documents.)";
    return {{"system", std::move(system)}, {"user", question}};
}

AskResult ask_remote(Library& lib, const LoadedModel& local, ChatEngine& engine, const AskOptions& o,
                     const AskCallbacks& cb) {
    auto status = [&](const std::string& s) {
        if (cb.on_status) cb.on_status(s);
    };
    const auto t_start = AskClock::now();
    AskResult r;
    const EffortSettings effort = effort_settings(o.effort);
    std::vector<DocId> ids;
    const std::vector<doc::Document> docs = ready_documents(lib, ids);
    std::vector<const doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);

    // Text only (a remote chat gets no image patches); no sink or closing padding (no attention
    // record to keep clean).
    ContextOptions co;
    co.sink_block = 0;
    co.closing_block = 0;
    const ContextBuilder builder(*local.tokenizer, *local.chat, co);
    status("reading the library (" + std::to_string(docs.size()) + " documents)");
    const PreparedContext prepared = builder.prepare(ptrs);
    const UnitRanking ranking = rank_for(prepared, lib, *local.tokenizer, o, cb);

    std::string ratio_note;
    const double ratio = token_ratio(engine, *local.tokenizer, ranking.texts, ratio_note);
    const int64_t remote_ctx = o.n_ctx > 0 ? o.n_ctx : engine.context_length() > 0 ? engine.context_length() : kDefaultRemoteCtx;
    const int64_t n_ctx = static_cast<int64_t>(std::floor(static_cast<double>(remote_ctx - kTemplateTokens) / ratio));
    status("remote engine " + engine.describe() + ": " + thousands(remote_ctx) + " tokens of context" +
           (o.n_ctx > 0                    ? " (--ctx)"
            : engine.context_length() > 0 ? ""
                                           : " (the server does not say: 4,096 assumed; --ctx N sets it)") +
           "; " + ratio_note);

    PlanOptions po;
    const BudgetPlan whole = plan_budget(prepared, n_ctx, effort, po);
    const bool question_specific = whole.total_planned < whole.total_full;
    if (question_specific) {
        po.unit_priority = ranking.score;
        po.global = true;
    }
    const BudgetPlan plan = question_specific ? plan_budget(prepared, n_ctx, effort, po) : whole;
    r.plan = plan.to_text();
    if (!plan.fits)
        throw Error(engine.describe() + ": the remote context of " + std::to_string(remote_ctx) +
                    " tokens is too small for the question and answer");
    if (cb.on_plan) cb.on_plan(r.plan);
    const TokenStream ts = builder.assemble(prepared, &plan);
    r.context_tokens = static_cast<int64_t>(std::ceil(static_cast<double>(ts.prefix_tokens) * ratio));
    r.read_summary = question_specific ? describe_ranked(ts, prepared.units.size(), 0)
                                       : "all " + std::to_string(prepared.units.size()) + " units of the library";
    const std::vector<UnitEvidence> evidence = evidence_of(ts, prepared, ranking);
    std::vector<std::string> texts(ts.units.size());
    for (size_t u = 0; u < ts.units.size(); ++u) texts[u] = evidence[u].text;

    ChatRequest req;
    req.messages = remote_messages(co.instructions, ts, texts, o.question);
    req.max_tokens = effort.answer_tokens;
    req.temperature = o.temperature > 0 ? o.temperature : 0;
    req.logprobs = true;

    // The answer, streamed.
    SelectionCollector collector(ts, 128);
    AnswerGuard guard;
    ThinkFilter think;  // a server without a reasoning parser streams <think> blocks inline
    auto visible = [&](std::string_view t) {
        if (t.empty()) return true;
        if (r.first_token_seconds == 0) r.first_token_seconds = since(t_start);
        collector.on_text(t);
        const bool go_on = guard.on_text(t);
        if (cb.on_text) cb.on_text(t);
        return go_on;
    };
    status("asking " + engine.describe() + " (" + thousands(r.context_tokens) + " context tokens, estimated)");
    const auto t_send = AskClock::now();
    const ChatReply reply = engine.chat(req, [&](std::string_view t) { return visible(think.feed(t)); }, o.cancel);
    visible(think.finish());
    if (o.cancel && o.cancel->load()) throw Cancelled("the question was cancelled");
    r.prefill_seconds = r.first_token_seconds > 0 ? r.first_token_seconds - std::chrono::duration<double>(t_send - t_start).count() : 0;
    r.decode_seconds = since(t_send) - r.prefill_seconds;
    if (reply.prompt_tokens > 0) r.context_tokens = reply.prompt_tokens;
    r.prefilled_tokens = r.context_tokens;

    std::string stop = stop_reason_of(reply.finish_reason);
    bool cut = false;
    if (guard.looped()) {
        collector.truncate_text(guard.keep());
        stop = "repetition";
        cut = true;
    } else if (stop == "max tokens") {
        const size_t keep = AnswerGuard::last_sentence_end(collector.text());
        if (keep > 0 && keep < collector.text().size()) collector.truncate_text(keep);
        cut = true;
    }
    CiteOptions cite_options;
    cite_options.evidence = &evidence;
    cite_options.embedder = o.embedder;
    r.answer = cite(collector, *local.tokenizer, cite_options);
    r.answer.question = o.question;
    r.answer.stop_reason = stop;
    r.answer.cut = cut;
    // The server's count of answer tokens, or the local tokenizer's count of the text (servers that
    // send no usage in streams).
    r.answer.steps = reply.completion_tokens > 0
                         ? static_cast<int>(reply.completion_tokens)
                         : static_cast<int>(local.tokenizer->encode(r.answer.text, false, false).size());
    r.attention = "remote (" + engine.describe() + ")";
    r.kv_note = "the answer came from " + engine.describe() +
                "; its citations verify each sentence against the units sent (attention-based citations need the "
                "local engine)";
    if (reply.attempts > 1)
        r.kv_note += "; the server was busy or failing: answered after " + std::to_string(reply.attempts) + " attempts";
    double mean_logprob = 0;
    for (double lp : reply.logprobs) mean_logprob += lp;
    if (!reply.logprobs.empty()) mean_logprob /= static_cast<double>(reply.logprobs.size());

    store_chat(lib, o, ts, ids, r, [&](JsonWriter& w) {
        w.key("attention"), w.value("remote");
        w.key("engine"), w.value(engine.describe());
        w.key("model"), w.value(engine.model());
        w.key("n_ctx"), w.value(remote_ctx);
        w.key("token_ratio"), w.value(ratio);
        w.key("attempts"), w.value(reply.attempts);
        if (!reply.logprobs.empty()) w.key("mean_logprob"), w.value(mean_logprob);
    });
    return r;
}

}  // namespace sl
