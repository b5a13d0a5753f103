// `sightline-cli quickstart [--question TEXT] [--report FILE] [--verify]`: the README's main job.
// It shows what this build links, checks the default model and the sample inputs, reads the
// samples (a PDF manual, a PowerPoint deck, a video), asks the default model a question about them
// and prints the answer with the places it read, then writes a Markdown report.
//
// Until the library issue lands (one long context, citations from the engine's own block
// selections), the places are chosen by lexical ranking (BM25) of pages, slides and segments and
// given to the model as numbered sources.
#include <QStringList>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/cli/cli_command.h"
#include "app/common/version_report.h"
#include "core/context/lexical_rank.h"
#include "core/document/locator.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/sha256.h"
#include "ingest/reader.h"

namespace {

namespace fs = std::filesystem;

const char* kDefaultQuestion = "How do I fit a linear regression model and look at its coefficients?";

// The sample files the main job reads (relative to the cache).
const char* kSamples[] = {"samples/pdf/R-intro.pdf", "samples/pptx/pandoc-reference.pptx", "samples/video/vtest.avi"};

std::string mib(uintmax_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

bool check_asset(const sl::assets::Asset& a, bool hash) {
    const fs::path p = sl::assets::path_of(a.relative_path);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) {
        sl::cli::err("  MISSING  " + p.string() + " (run " + sl::paths::setup_command() + ")\n");
        return false;
    }
    if (hash && sl::sha256_file_hex(p) != a.sha256) {
        sl::cli::err("  BAD HASH " + p.string() + " (expected " + a.sha256 + "; run " + sl::paths::setup_command() + ")\n");
        return false;
    }
    sl::cli::out("  ok       " + a.relative_path + "  " + mib(size) + (hash ? "  sha256 ok" : "") + "\n");
    return true;
}

struct Passage {
    std::string locator;  // "R-intro.pdf p. 12"
    std::string text;
};

std::string trimmed(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes) return s;
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    return s.substr(0, cut) + " ...";
}

std::string one_line(std::string s) {
    for (auto& c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    return s;
}

int run(const QStringList& args) {
    bool verify_all = false;
    std::string question = kDefaultQuestion;
    fs::path report = fs::current_path() / "sightline-report.md";
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--verify")) verify_all = true;
        else if (args[i] == QLatin1String("--question") && i + 1 < args.size()) question = args[++i].toStdString();
        else if (args[i] == QLatin1String("--report") && i + 1 < args.size()) report = args[++i].toStdString();
        else {
            sl::cli::err("usage: sightline-cli quickstart [--question TEXT] [--report FILE] [--verify]\n");
            return 2;
        }
    }
    sl::cli::out(sl::app::format_version_report(sl::app::version_report()));

    sl::cli::out("\nDefault model and sample inputs" + std::string(verify_all ? " (sha256 checked)" : "") + "\n");
    bool ok = true;
    for (const auto& a : sl::assets::all()) ok = check_asset(a, verify_all || a.relative_path == sl::assets::kDefaultModel) && ok;
    if (!ok) return 1;

    auto model = sl::load_model(sl::paths::default_model());
    const auto& c = model->model->config();
    sl::cli::out("  model: " + c.arch + ", " + std::to_string(c.n_layer) + " layers, d_model " + std::to_string(c.d_model) +
                 ", " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) + " heads, vocab " +
                 std::to_string(c.n_vocab) + ", loaded in " + std::to_string(static_cast<int>(model->load_seconds * 1000)) +
                 " ms\n");

    sl::cli::out("\nReading the samples\n");
    std::vector<Passage> passages;
    int failures = 0;
    for (const char* rel : kSamples) {
        const std::string path = sl::assets::path_of(rel).string();
        const auto t0 = std::chrono::steady_clock::now();
        try {
            sl::ingest::IngestOptions opt;
            opt.max_frames_per_minute = 2;
            opt.thumbnail_px = 0;
            sl::ingest::IngestContext ctx(opt);
            const sl::doc::Document d = sl::ingest::read_document(path, ctx);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            char line[256];
            std::snprintf(line, sizeof line, "  %-28s %s, %zu units, %zu blocks, %zu characters, %zu visuals, %.2f s\n",
                          sl::doc::file_name(d).c_str(), sl::doc::to_string(d.kind), d.units.size(), d.block_count(),
                          d.text_chars(), d.visual_count(), s);
            sl::cli::out(line);
            for (const auto& u : d.units) {
                std::string text;
                for (const auto& b : u.blocks) text += b.text + "\n";
                if (!text.empty()) passages.push_back({sl::doc::full_locator(d, u), text});
            }
        } catch (const sl::Error& e) {
            sl::cli::err(std::string("  error: ") + e.what() + "\n");
            ++failures;
        }
    }

    sl::cli::out("\nQuestion: " + question + "\n");
    std::vector<std::string> texts;
    for (const auto& p : passages) texts.push_back(p.text);
    const sl::LexicalIndex index(texts);
    const auto hits = index.rank(question, 3);
    std::string sources;
    std::vector<const Passage*> used;
    for (const auto& h : hits) {
        const Passage& p = passages[h.passage];
        used.push_back(&p);
        // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...).
        sources += '[';
        sources += std::to_string(used.size());
        sources += "] (" + p.locator + ")\n" + trimmed(p.text, 1200) + "\n\n";
    }
    const std::string user = "Sources:\n\n" + sources + "Using only the sources above, answer briefly: " + question;
    const std::vector<sl::ChatMessage> msgs{{"user", user}};
    const auto tokens = model->tokenizer->encode(model->chat->render(msgs, true), false, true);
    sl::SessionOptions so;
    so.n_ctx = static_cast<int>(tokens.size()) + 200;
    sl::Session session(*model, so);
    session.prefill(tokens);
    sl::GenerateOptions gen;
    gen.max_tokens = 120;
    gen.sampling.greedy = true;
    gen.stop = model->chat->stop_strings();
    std::string answer;
    sl::cli::out("Answer: ");
    const sl::GenerateStats st = session.generate(gen, [&](std::string_view t) {
        answer += t;
        sl::cli::out(std::string(t));
        return true;
    });
    sl::cli::out("\nRead (lexical preselection, BM25):\n");
    for (size_t i = 0; i < used.size(); ++i)
        sl::cli::out("  [" + std::to_string(i + 1) + "] " + used[i]->locator + ": " + one_line(trimmed(used[i]->text, 90)) + '\n');
    char stats[200];
    std::snprintf(stats, sizeof stats, "  (%d context tokens prefilled in %.1f s, %d answer tokens in %.1f s)\n",
                  st.prompt_tokens, st.prefill_seconds, st.generated_tokens, st.decode_seconds);
    sl::cli::out(stats);

    std::ofstream md(report);
    md << "# Sightline report\n\n**Question:** " << question << "\n\n**Answer** (SmolLM2-135M-Instruct, greedy):\n\n"
       << answer << "\n\n## Sources read\n\n";
    for (size_t i = 0; i < used.size(); ++i)
        md << i + 1 << ". **" << used[i]->locator << "** — " << one_line(trimmed(used[i]->text, 300)) << "\n";
    md << "\n_Chosen by lexical ranking of " << passages.size() << " pages, slides and video segments._\n";
    md.close();
    if (!md) {
        sl::cli::err("error: cannot write " + report.string() + "\n");
        return 1;
    }
    sl::cli::out("\nReport written to " + report.string() + "\n");
    return failures ? 1 : 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(quickstart, "quickstart", "the main job on the bundled samples (README quick start)", run);
