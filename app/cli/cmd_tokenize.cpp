// `sightline-cli tokenize [--model M] [--no-special] [--ids] TEXT`: the token ids and pieces of
// TEXT under a GGUF model's tokenizer (default: the model scripts/setup.sh fetched). Control tokens
// written in TEXT ("<|im_start|>") are parsed as such unless --no-special.
#include <QStringList>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/gguf/gguf_reader.h"
#include "core/model/model_loader.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "core/util/paths.h"

namespace {

const char* kUsage = "usage: sightline-cli tokenize [--model MODEL.gguf] [--no-special] [--ids] TEXT\n";

namespace fs = std::filesystem;

// A piece for the terminal: valid UTF-8 as is, control characters and bytes that are not valid
// UTF-8 on their own (a character split across tokens) escaped.
std::string escaped(std::string_view piece) {
    std::string out;
    for (size_t pos = 0; pos < piece.size();) {
        const sl::unicode::Utf8Char ch = sl::unicode::decode_utf8(piece, pos);
        const auto c = static_cast<unsigned char>(piece[pos]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\\') {
            out += "\\\\";
        } else if (ch.cp == sl::unicode::kInvalid || c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out.append(piece.substr(pos, ch.len));
        }
        pos += ch.len;
    }
    return out;
}

int run(const QStringList& args) {
    const char* usage = kUsage;
    std::optional<fs::path> model;
    std::optional<std::string> text;
    bool parse_special = true;
    bool ids_only = false;
    for (qsizetype i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (a == QLatin1String("--") && i + 2 == args.size() && !text) {  // the text follows, whatever it starts with
            text = args[i + 1].toStdString();
            break;
        }
        if (a == QLatin1String("--model") && i + 1 < args.size()) {
            model = fs::path(sl::arg_bytes(args[++i]));
        } else if (a == QLatin1String("--no-special")) {
            parse_special = false;
        } else if (a == QLatin1String("--ids")) {
            ids_only = true;
        } else if (a.startsWith(QLatin1String("--")) || text) {
            sl::cli::err(usage);
            return 2;
        } else {
            text = a.toStdString();
        }
    }
    if (!text) {
        sl::cli::err(usage);
        return 2;
    }
    const sl::GgufFile f = sl::GgufFile::open(model.value_or(sl::paths::default_model()));
    const auto tok = sl::Tokenizer::create(sl::read_tokenizer_data(f));
    const std::vector<int32_t> ids = tok->encode(*text, false, parse_special);
    std::string out;
    if (ids_only) {
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ' ';
            out += std::to_string(ids[i]);
        }
        out += '\n';
        sl::cli::out(out);
        return 0;
    }
    out = std::to_string(ids.size()) + " tokens\n";
    for (int32_t id : ids) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%8d  ", id);
        out += buf;
        out.append(1, '\'').append(escaped(tok->piece(id))).append("'\n");
    }
    sl::cli::out(out);
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(tokenize, "tokenize", "token ids and pieces of TEXT ([--model M] TEXT)", kUsage, run);
