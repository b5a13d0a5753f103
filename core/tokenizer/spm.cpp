// SentencePiece BPE as llama.cpp runs it for tokenizer.ggml.model "llama" (Llama 2, Mistral):
// spaces become U+2581, a space is put before the text (add_space_prefix) and after each special
// token, then the pair whose joined text is the highest-scoring token merges first (ties:
// leftmost); characters left without a token fall back to the <0xXX> byte tokens, else to unk.
#include <queue>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tokenizer/tokenizer_factories.h"
#include "core/util/error.h"

namespace sl {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// The byte of a "<0xAB>" token (exactly two hex digits), or -1. Not sscanf("<0x%02X>"): it takes
// a sign ("<0x-1>" read as 0xFFFFFFFF indexed byte_token_ out of bounds) and ignores the '>'.
int byte_token_value(const std::string& t) {
    const auto hex = [](char c) {
        return c >= '0' && c <= '9' ? c - '0'
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
    };
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    const int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class SpmTokenizer final : public Tokenizer {
public:
    explicit SpmTokenizer(TokenizerData data) : Tokenizer(std::move(data)) {
        const size_t n = data_.tokens.size();
        if (data_.scores.empty()) data_.scores.assign(n, 0.0f);
        pieces_.resize(n);
        byte_token_.fill(-1);
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = data_.tokens[i];
            const auto type = static_cast<TokenType>(data_.token_types[i]);
            if (const int byte = type == TokenType::Byte ? byte_token_value(t) : -1; byte >= 0) {
                pieces_[i] = std::string(1, static_cast<char>(byte));
                byte_token_[static_cast<size_t>(byte)] = static_cast<int32_t>(i);
            } else if (type == TokenType::Normal || type == TokenType::Undefined ||
                       type == TokenType::UserDefined) {
                pieces_[i] = unescape(t);
            } else {
                pieces_[i] = t;  // control, unknown, unused: their text
            }
        }
        strip_leading_space_ = data_.add_space_prefix;
    }

    std::vector<int32_t> encode(std::string_view text, bool add_special,
                                bool parse_special) const override {
        std::vector<int32_t> ids;
        bool prev_special = true;  // the space prefix goes before the first run of text
        Session s;
        for (const Segment& seg : split_special(text, parse_special)) {
            if (seg.id >= 0) {
                ids.push_back(seg.id);
                prev_special = true;
                continue;
            }
            std::string escaped =
                (data_.add_space_prefix && prev_special) ? std::string(kSpace) : std::string();
            for (char c : seg.text) {
                if (c == ' ')
                    escaped += kSpace;
                else
                    escaped += c;
            }
            encode_run(escaped, ids, s);
            prev_special = false;
        }
        if (add_special) add_special_tokens(ids);
        return ids;
    }

private:
    struct Symbol {
        int32_t prev;
        int32_t next;
        size_t off;  // into the escaped text
        size_t n;    // bytes; 0 once merged into its left neighbour
    };
    struct Bigram {
        int32_t left;
        int32_t right;
        float score;
        size_t size;
        // Max-heap order: higher score first, then the leftmost pair.
        bool operator<(const Bigram& o) const {
            return score < o.score || (score == o.score && left > o.left);
        }
    };
    struct Session {
        std::vector<Symbol> syms;
        std::priority_queue<Bigram> queue;
        std::unordered_map<std::string_view, std::pair<int32_t, int32_t>> rev_merge;
    };

    static std::string unescape(const std::string& t) {
        std::string out;
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, kSpace.size(), kSpace) == 0) {
                out += ' ';
                i += kSpace.size();
            } else {
                out += t[i++];
            }
        }
        return out;
    }

    void try_bigram(std::string_view text, Session& s, int32_t left, int32_t right) const {
        if (left < 0 || right < 0) return;
        const Symbol& l = s.syms[static_cast<size_t>(left)];
        const Symbol& r = s.syms[static_cast<size_t>(right)];
        const std::string_view joined = text.substr(l.off, l.n + r.n);
        const int32_t id = find_token(joined);
        if (id < 0) return;
        s.queue.push({left, right, data_.scores[static_cast<size_t>(id)], joined.size()});
        s.rev_merge[joined] = {left, right};
    }

    void resegment(std::string_view text, const Session& s, int32_t i,
                   std::vector<int32_t>& out) const {
        const Symbol& sym = s.syms[static_cast<size_t>(i)];
        const std::string_view t = text.substr(sym.off, sym.n);
        if (const int32_t id = find_token(t); id >= 0) {
            out.push_back(id);
            return;
        }
        if (const auto it = s.rev_merge.find(t); it != s.rev_merge.end()) {
            resegment(text, s, it->second.first, out);
            resegment(text, s, it->second.second, out);
            return;
        }
        for (char c : t) {  // no token for this character: its bytes
            const int32_t b = byte_token_[static_cast<uint8_t>(c)];
            if (b >= 0)
                out.push_back(b);
            else if (data_.unk_id >= 0)
                out.push_back(data_.unk_id);
        }
    }

    void encode_run(std::string_view text, std::vector<int32_t>& out, Session& s) const {
        s.syms.clear();
        s.rev_merge.clear();
        s.queue = {};
        for (size_t off = 0; off < text.size();) {
            const auto b = static_cast<uint8_t>(text[off]);
            const size_t len = b < 0x80         ? 1
                               : (b >> 5) == 6  ? 2
                               : (b >> 4) == 14 ? 3
                               : (b >> 3) == 30 ? 4
                                                : 1;
            const size_t n = std::min(len, text.size() - off);
            const auto i = static_cast<int32_t>(s.syms.size());
            s.syms.push_back({i - 1, off + n < text.size() ? i + 1 : -1, off, n});
            off += n;
        }
        if (s.syms.empty()) return;
        for (int32_t i = 1; i < static_cast<int32_t>(s.syms.size()); ++i)
            try_bigram(text, s, i - 1, i);
        while (!s.queue.empty()) {
            const Bigram bg = s.queue.top();
            s.queue.pop();
            Symbol& l = s.syms[static_cast<size_t>(bg.left)];
            Symbol& r = s.syms[static_cast<size_t>(bg.right)];
            if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) s.syms[static_cast<size_t>(r.next)].prev = bg.left;
            try_bigram(text, s, l.prev, bg.left);
            try_bigram(text, s, bg.left, l.next);
        }
        for (int32_t i = 0; i >= 0; i = s.syms[static_cast<size_t>(i)].next)
            resegment(text, s, i, out);
    }

    std::array<int32_t, 256> byte_token_{};
};

}  // namespace

std::unique_ptr<Tokenizer> detail::make_spm(TokenizerData data) {
    return std::make_unique<SpmTokenizer>(std::move(data));
}

}  // namespace sl
