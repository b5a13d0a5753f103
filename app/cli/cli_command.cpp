#include "app/cli/cli_command.h"

#include "core/tokenizer/unicode.h"

namespace sl::cli {

std::vector<Command>& commands() {
    static std::vector<Command> list;
    return list;
}

bool register_command(const Command& command) {
    commands().push_back(command);
    return true;
}

std::string terminal_safe(std::string_view text) {
    std::string o;
    o.reserve(text.size());
    auto hex = [&](unsigned v) {
        char b[8];
        std::snprintf(b, sizeof b, "\\x%02x", v);
        o += b;
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) {
            hex(c);
        } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f) {  // C1 controls (U+0080..U+009F), CSI among them
            hex(static_cast<unsigned char>(text[++i]));
        } else if (c >= 0x80) {  // UTF-8 passes; a stray byte (a Latin-1 file name) is written as \xNN
            const auto [cp, len] = unicode::decode_utf8(text, i);
            if (cp == unicode::kInvalid) {
                hex(c);
            } else {
                o.append(text.substr(i, len));
                i += len - 1;
            }
        } else {
            o += static_cast<char>(c);
        }
    }
    return o;
}

void out(const std::string& text) {
    const std::string safe = terminal_safe(text);
    std::fwrite(safe.data(), 1, safe.size(), stdout);
    std::fflush(stdout);
}

void err(const std::string& text) {
    const std::string safe = terminal_safe(text);
    std::fwrite(safe.data(), 1, safe.size(), stderr);
    std::fflush(stderr);
}

bool valid_device(std::string_view device) { return device == "auto" || device == "cpu" || device == "cuda"; }

}  // namespace sl::cli
