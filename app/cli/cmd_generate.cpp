// `sightline-cli generate [--model M] --prompt TEXT [--chat] [--system TEXT] [--greedy] [-n N]
// [--seed S] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--threads N]
// [--ctx N] [--stats] [--attention dense|msa] [--topk K] [--block B] [--msa-mode block-max|mean-key]
// [--dense-layers L]`: streams a continuation (or, with --chat, the assistant's answer) to stdout.
// --attention msa runs MSA sparse attention (training-free) with top-k blocks of B tokens.
#include <QStringList>

#include <cstdio>

#include "app/cli/cli_command.h"
#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/paths.h"

namespace {

const char* kUsage =
    "usage: sightline-cli generate [--model M] --prompt TEXT [--chat] [--system TEXT] [--greedy] [-n N]\n"
    "       [--seed S] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
    "       [--threads N] [--ctx N] [--stats]\n"
    "       [--attention dense|msa] [--topk K] [--block B] [--msa-mode block-max|mean-key] [--dense-layers L]\n";

int run(const QStringList& args) {
    std::string model_path = sl::paths::default_model().string();
    std::string prompt, system;
    bool chat = false, stats = false, have_prompt = false;
    sl::GenerateOptions gen;
    sl::SessionOptions so;
    bool msa = false;
    sl::MsaConfig msa_cfg;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        const bool has_value = i + 1 < args.size();
        auto value = [&]() { return args[++i]; };
        if (a == QLatin1String("--chat")) chat = true;
        else if (a == QLatin1String("--greedy")) gen.sampling.greedy = true;
        else if (a == QLatin1String("--stats")) stats = true;
        else if (!has_value) {
            sl::cli::err(std::string("sightline-cli generate: ") + (a.startsWith(QLatin1Char('-')) ? "missing value for " + a.toStdString() : "unexpected " + a.toStdString()) + "\n" + kUsage);
            return 2;
        } else if (a == QLatin1String("--model")) model_path = value().toStdString();
        else if (a == QLatin1String("--prompt")) { prompt = value().toStdString(); have_prompt = true; }
        else if (a == QLatin1String("--system")) system = value().toStdString();
        else if (a == QLatin1String("-n")) gen.max_tokens = value().toInt();
        else if (a == QLatin1String("--seed")) gen.sampling.seed = value().toULongLong();
        else if (a == QLatin1String("--temp")) gen.sampling.temperature = value().toFloat();
        else if (a == QLatin1String("--top-k")) gen.sampling.top_k = value().toInt();
        else if (a == QLatin1String("--top-p")) gen.sampling.top_p = value().toFloat();
        else if (a == QLatin1String("--min-p")) gen.sampling.min_p = value().toFloat();
        else if (a == QLatin1String("--repeat-penalty")) gen.sampling.repeat_penalty = value().toFloat();
        else if (a == QLatin1String("--threads")) so.n_threads = value().toInt();
        else if (a == QLatin1String("--ctx")) so.n_ctx = value().toInt();
        else if (a == QLatin1String("--topk")) msa_cfg.top_k = value().toInt();
        else if (a == QLatin1String("--block")) msa_cfg.block_size = value().toInt();
        else if (a == QLatin1String("--dense-layers")) msa_cfg.dense_layers = value().toInt();
        else if (a == QLatin1String("--attention") || a == QLatin1String("--msa-mode")) {
            const QString v = value();
            if (a == QLatin1String("--attention") && (v == QLatin1String("dense") || v == QLatin1String("msa"))) msa = v == QLatin1String("msa");
            else if (a == QLatin1String("--msa-mode") && v == QLatin1String("block-max")) msa_cfg.scoring = sl::BlockScoring::BlockMax;
            else if (a == QLatin1String("--msa-mode") && v == QLatin1String("mean-key")) msa_cfg.scoring = sl::BlockScoring::MeanKey;
            else {
                sl::cli::err("sightline-cli generate: bad value '" + v.toStdString() + "' for " + a.toStdString() + "\n" + kUsage);
                return 2;
            }
        }
        else {
            sl::cli::err("sightline-cli generate: unknown option " + a.toStdString() + "\n" + kUsage);
            return 2;
        }
    }
    if (!have_prompt) {
        sl::cli::err(kUsage);
        return 2;
    }
    auto m = sl::load_model(model_path);
    std::vector<int32_t> tokens;
    if (chat) {
        std::vector<sl::ChatMessage> msgs;
        if (!system.empty()) msgs.push_back({"system", system});
        msgs.push_back({"user", prompt});
        tokens = m->tokenizer->encode(m->chat->render(msgs, true), false, true);
        for (auto& s : m->chat->stop_strings()) gen.stop.push_back(s);
    } else {
        tokens = m->tokenizer->encode(prompt, true, false);
    }
    so.n_ctx = std::max<int>(so.n_ctx, static_cast<int>(tokens.size()) + gen.max_tokens + 1);
    sl::Session session(*m, so, msa ? std::make_unique<sl::MsaAttention>(msa_cfg) : nullptr);
    session.prefill(tokens);
    if (!chat) sl::cli::out(prompt);
    const sl::GenerateStats st = session.generate(gen, [](std::string_view text) {
        sl::cli::out(std::string(text));
        return true;
    });
    sl::cli::out("\n");
    if (stats) {
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "[model load %.2f s | prompt %d tokens in %.2f s (%.1f tok/s) | generated %d tokens in %.2f s "
                      "(%.1f tok/s) | stop: %s | %d threads]\n",
                      m->load_seconds, st.prompt_tokens, st.prefill_seconds,
                      st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0, st.generated_tokens,
                      st.decode_seconds, st.decode_seconds > 0 ? st.generated_tokens / st.decode_seconds : 0.0,
                      st.stop_reason.c_str(), session.pool().size());
        sl::cli::err(buf);
    }
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(generate, "generate", "stream a continuation or chat answer from a model", run);
