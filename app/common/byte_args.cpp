#include "app/common/byte_args.h"

#include <string_view>

#include "core/tokenizer/unicode.h"

namespace sl {

QString decode_arg(const char* arg) {
    QString out;
    const std::string_view s(arg);
    out.reserve(static_cast<qsizetype>(s.size()));
    for (size_t i = 0; i < s.size();) {
        const auto [cp, len] = unicode::decode_utf8(s, i);
        if (cp == unicode::kInvalid) {
            out += QChar(static_cast<char16_t>(0xDC00 + static_cast<unsigned char>(s[i])));
            ++i;
            continue;
        }
        if (cp >= 0x10000) {
            out += QChar(QChar::highSurrogate(cp));
            out += QChar(QChar::lowSurrogate(cp));
        } else {
            out += QChar(static_cast<char16_t>(cp));
        }
        i += len;
    }
    return out;
}

QStringList decode_args(int argc, char** argv) {
    QStringList out;
    for (int i = 1; i < argc; ++i) out << decode_arg(argv[i]);
    return out;
}

std::string arg_bytes(const QString& arg) {
    std::string out;
    out.reserve(static_cast<size_t>(arg.size()));
    auto put = [&out](uint32_t cp) { unicode::append_utf8(out, cp); };
    for (qsizetype i = 0; i < arg.size(); ++i) {
        const char16_t u = arg[i].unicode();
        if (u >= 0xDC80 && u <= 0xDCFF) {  // an escaped byte
            out.push_back(static_cast<char>(u - 0xDC00));
        } else if (QChar::isHighSurrogate(u) && i + 1 < arg.size() && arg[i + 1].isLowSurrogate()) {
            put(QChar::surrogateToUcs4(u, arg[i + 1].unicode()));
            ++i;
        } else if (QChar::isSurrogate(u)) {
            put(0xFFFD);  // a lone surrogate that is no escaped byte
        } else {
            put(u);
        }
    }
    return out;
}

}  // namespace sl
