// Byte-level BPE as GPT-2, Llama 3, Qwen2 and SmolLM use it (Hugging Face tokenizers' BPE model
// with a ByteLevel pre-tokenizer): split the text at special tokens, pre-tokenize each plain run
// into words, map each word's bytes to the byte tokens and apply the merges, lowest rank first.
#include "core/tokenizer/bpe_gpt2.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/pretokenize.h"
#include "core/tokenizer/tokenizer_factories.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace sl {

namespace bpe {

namespace {

struct ByteMap {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 324> from_cp{};  // code points 0..323 cover every image

    ByteMap() {
        from_cp.fill(-1);
        uint32_t extra = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable =
                (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_cp[b] = printable ? b : 256 + extra++;
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

uint32_t byte_to_cp(uint8_t b) {
    return byte_map().to_cp[b];
}

int byte_from_cp(uint32_t cp) {
    return cp < 324 ? byte_map().from_cp[cp] : -1;
}

std::string bytes_to_vocab_text(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) unicode::append_utf8(out, byte_to_cp(static_cast<uint8_t>(c)));
    return out;
}

std::string vocab_text_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const unicode::Utf8Char c = unicode::decode_utf8(text, pos);
        const int b = c.cp == unicode::kInvalid ? -1 : byte_from_cp(c.cp);
        if (b >= 0)
            out += static_cast<char>(b);
        else
            out.append(text.substr(pos, c.len));
        pos += c.len;
    }
    return out;
}

}  // namespace bpe

namespace {

// Open-addressing hash table: (left id, right id) -> (rank, merged id). Built once, read-only.
class MergeTable {
public:
    struct Entry {
        uint64_t key = kEmpty;
        int32_t rank = 0;
        int32_t result = 0;
    };

    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < 2 * n) cap *= 2;
        slots_.assign(cap, Entry{});
        mask_ = cap - 1;
    }
    // Keeps the first (lowest-rank) entry for a pair.
    void insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
        const uint64_t key = make_key(left, right);
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return;
            if (slots_[i].key == kEmpty) {
                slots_[i] = {key, rank, result};
                return;
            }
        }
    }
    const Entry* find(int32_t left, int32_t right) const {
        const uint64_t key = make_key(left, right);
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i];
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static uint64_t make_key(int32_t l, int32_t r) {
        return (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
    }
    size_t hash(uint64_t key) const {
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }
    std::vector<Entry> slots_;
    size_t mask_ = 0;
};

PreTokenizer pre_tokenizer_for(const TokenizerData& d) {
    const std::string& p = d.pre;
    if (p.empty() || p == "default" || p == "gpt2" || p == "gpt-2" || p == "mpt" || p == "olmo" ||
        p == "jais") {
        return PreTokenizer::Gpt2;
    }
    if (p == "smollm" || p == "starcoder" || p == "refact" || p == "command-r" ||
        p == "codeshell" || p == "exaone") {
        return PreTokenizer::DigitsGpt2;
    }
    if (p == "llama-bpe" || p == "llama3" || p == "dbrx" || p == "smaug-bpe" || p == "falcon3") {
        return PreTokenizer::Llama3;
    }
    if (p == "qwen2" || p == "stablelm2" || p == "deepseek-r1-qwen" || p == "megrez") {
        return PreTokenizer::Qwen2;
    }
    if (p == "gpt-4o" || p == "minimax-m2") return PreTokenizer::O200k;
    throw FormatError((d.name.empty() ? std::string("tokenizer") : d.name) +
                      ": unsupported pre-tokenizer '" + p + "' (tokenizer.ggml.pre)");
}

class BpeGpt2Tokenizer final : public Tokenizer {
public:
    explicit BpeGpt2Tokenizer(TokenizerData data)
        : Tokenizer(std::move(data)), pre_(pre_tokenizer_for(data_)) {
        // Hugging Face sets ignore_merges for Llama 3: a word that is a token stays whole.
        ignore_merges_ = pre_ == PreTokenizer::Llama3;
        const size_t n = data_.tokens.size();
        pieces_.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const auto t = static_cast<TokenType>(data_.token_types[i]);
            const bool literal = t == TokenType::Control || t == TokenType::UserDefined ||
                                 t == TokenType::Unknown || t == TokenType::Unused;
            pieces_[i] = literal ? data_.tokens[i] : bpe::vocab_text_to_bytes(data_.tokens[i]);
        }
        for (int b = 0; b < 256; ++b) {
            std::string s;
            unicode::append_utf8(s, bpe::byte_to_cp(static_cast<uint8_t>(b)));
            byte_token_[static_cast<size_t>(b)] = find_token(s);
        }
        merges_.reserve(data_.merges.size());
        std::string joined;
        for (size_t rank = 0; rank < data_.merges.size(); ++rank) {
            const std::string& m = data_.merges[rank];
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) {
                throw FormatError(data_.name + ": merge " + std::to_string(rank) + " '" + m +
                                  "' is not 'left right'");
            }
            const std::string_view left(m.data(), sp);
            const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
            joined.assign(left).append(right);
            const int32_t l = find_token(left), r = find_token(right), res = find_token(joined);
            if (l < 0 || r < 0 || res < 0) continue;  // names a token the vocabulary lacks
            merges_.insert(l, r, static_cast<int32_t>(rank), res);
        }
    }

    std::vector<int32_t> encode(std::string_view text, bool add_special,
                                bool parse_special) const override {
        std::vector<int32_t> ids;
        ids.reserve(text.size() / 3 + 4);
        // Words seen in this call -> their ids' [offset, count) in `ids`.
        std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
        std::vector<std::string_view> words;
        Scratch scratch;
        for (const Segment& seg : split_special(text, parse_special)) {
            if (seg.id >= 0) {
                ids.push_back(seg.id);
                continue;
            }
            words.clear();
            pretokenize(pre_, seg.text, words);
            for (std::string_view w : words) {
                if (w.size() == 1) {
                    const int32_t id = byte_token_[static_cast<uint8_t>(w[0])];
                    if (id >= 0) ids.push_back(id);
                    continue;
                }
                const auto [it, fresh] = cache.try_emplace(w);
                if (!fresh) {
                    const auto [off, cnt] = it->second;
                    ids.reserve(ids.size() + cnt);
                    for (uint32_t k = 0; k < cnt; ++k) ids.push_back(ids[off + k]);
                    continue;
                }
                const auto off = static_cast<uint32_t>(ids.size());
                encode_word(w, ids, scratch);
                it->second = {off, static_cast<uint32_t>(ids.size()) - off};
            }
        }
        if (add_special) add_special_tokens(ids);
        return ids;
    }

private:
    struct Symbol {
        int32_t id;
        int32_t prev;
        int32_t next;
    };
    struct Candidate {
        int32_t rank;
        int32_t pos;
        int32_t left;
        int32_t right;
        int32_t result;
        bool operator>(const Candidate& o) const {
            return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
    };
    struct Scratch {
        std::vector<Symbol> syms;
        std::vector<Candidate> heap;
        std::string mapped;
    };

    void push_pair(Scratch& s, int32_t pos) const {
        if (pos < 0) return;
        const int32_t next = s.syms[static_cast<size_t>(pos)].next;
        if (next < 0) return;
        const auto* m =
            merges_.find(s.syms[static_cast<size_t>(pos)].id, s.syms[static_cast<size_t>(next)].id);
        if (!m) return;
        s.heap.push_back({m->rank, pos, s.syms[static_cast<size_t>(pos)].id,
                          s.syms[static_cast<size_t>(next)].id, m->result});
        std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
    }

    // Appends the BPE ids of one pre-token word (>= 2 bytes) to `out`.
    void encode_word(std::string_view w, std::vector<int32_t>& out, Scratch& s) const {
        if (ignore_merges_) {
            s.mapped = bpe::bytes_to_vocab_text(w);
            const int32_t id = find_token(s.mapped);
            if (id >= 0) {
                out.push_back(id);
                return;
            }
        }
        s.syms.clear();
        for (char c : w) {
            const int32_t id = byte_token_[static_cast<uint8_t>(c)];
            if (id < 0) continue;  // no token for this byte: dropped, as HF does without unk
            const auto i = static_cast<int32_t>(s.syms.size());
            s.syms.push_back({id, i - 1, -1});
            if (i > 0) s.syms[static_cast<size_t>(i - 1)].next = i;
        }
        if (s.syms.empty()) return;
        s.heap.clear();
        for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.syms.size()); ++i) push_pair(s, i);
        while (!s.heap.empty()) {
            std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
            const Candidate c = s.heap.back();
            s.heap.pop_back();
            Symbol& a = s.syms[static_cast<size_t>(c.pos)];
            if (a.id != c.left || a.next < 0) continue;  // stale: merged away since
            Symbol& b = s.syms[static_cast<size_t>(a.next)];
            if (b.id != c.right) continue;
            a.id = c.result;
            b.id = -1;  // dead
            a.next = b.next;
            if (a.next >= 0) s.syms[static_cast<size_t>(a.next)].prev = c.pos;
            if (a.prev >= 0) push_pair(s, a.prev);
            push_pair(s, c.pos);
        }
        for (int32_t i = 0; i >= 0; i = s.syms[static_cast<size_t>(i)].next) {
            out.push_back(s.syms[static_cast<size_t>(i)].id);
        }
    }

    PreTokenizer pre_;
    bool ignore_merges_ = false;
    std::array<int32_t, 256> byte_token_{};  // id of each byte's token, -1 when missing
    MergeTable merges_;
};

}  // namespace

std::unique_ptr<Tokenizer> detail::make_bpe_gpt2(TokenizerData data) {
    return std::make_unique<BpeGpt2Tokenizer>(std::move(data));
}

}  // namespace sl
