#include "core/embed/wordpiece_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/embed/bert_unicode.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace sl {

namespace {

constexpr size_t kMaxVocab = 1u << 20;
constexpr size_t kMaxVocabBytes = 64u << 20;

// Is `cp` (after normalization) a word separator the pre-tokenizer drops?
bool is_space(uint32_t cp) {
    return cp == ' ' || bert_unicode::classify(cp) == bert_unicode::Class::Space;
}

bool is_punct(uint32_t cp) {
    return bert_unicode::classify(cp) == bert_unicode::Class::Punct;
}

}  // namespace

WordpieceTokenizer WordpieceTokenizer::from_vocab_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string() + ": cannot open the vocabulary");
    in.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(in.tellg());
    if (size < 0) throw IoError(path.string() + ": cannot read the vocabulary");
    if (static_cast<uint64_t>(size) > kMaxVocabBytes)
        throw FormatError(path.string() + ": vocabulary of " + std::to_string(size) +
                          " bytes is over the " + std::to_string(kMaxVocabBytes) + "-byte limit");
    in.seekg(0);
    std::string bytes(static_cast<size_t>(size), '\0');
    if (!in.read(bytes.data(), size)) throw IoError(path.string() + ": cannot read the vocabulary");
    std::vector<std::string> vocab;
    size_t pos = 0;
    while (pos < bytes.size()) {
        size_t nl = bytes.find('\n', pos);
        if (nl == std::string::npos) nl = bytes.size();
        std::string line = bytes.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        vocab.push_back(std::move(line));
        pos = nl + 1;
    }
    return WordpieceTokenizer(std::move(vocab), path.string());
}

WordpieceTokenizer::WordpieceTokenizer(std::vector<std::string> vocab, const std::string& origin)
    : vocab_(std::move(vocab)) {
    if (vocab_.empty()) throw FormatError(origin + ": the vocabulary is empty");
    if (vocab_.size() > kMaxVocab)
        throw FormatError(origin + ": " + std::to_string(vocab_.size()) +
                          " tokens is over the limit of " + std::to_string(kMaxVocab));
    ids_.reserve(vocab_.size());
    for (size_t i = 0; i < vocab_.size(); ++i) {
        if (vocab_[i].empty())
            throw FormatError(origin + ": line " + std::to_string(i + 1) + " is an empty token");
        if (!ids_.emplace(vocab_[i], static_cast<int32_t>(i)).second)
            throw FormatError(origin + ": line " + std::to_string(i + 1) + ": token '" + vocab_[i] +
                              "' is a duplicate");
    }
    auto need = [&](const char* t) {
        const int32_t id = find(t);
        if (id < 0) throw FormatError(origin + ": the vocabulary has no " + t + " token");
        return id;
    };
    unk_ = need("[UNK]");
    cls_ = need("[CLS]");
    sep_ = need("[SEP]");
    pad_ = need("[PAD]");
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
        if (const int32_t id = find(t); id >= 0) specials_.push_back({t, id});
}

int32_t WordpieceTokenizer::find(std::string_view token) const {
    const auto it = ids_.find(std::string(token));
    return it == ids_.end() ? -1 : it->second;
}

void WordpieceTokenizer::normalize_into(std::string_view text, std::vector<uint32_t>& out) const {
    using bert_unicode::Class;
    size_t run_start = out.size();  // start of the current run of non-starters (canonical order)
    for (size_t pos = 0; pos < text.size();) {
        const auto ch = unicode::decode_utf8(text, pos);
        pos += ch.len;
        if (ch.cp == unicode::kInvalid) continue;  // as U+FFFD: dropped by clean text
        const Class k = bert_unicode::classify(ch.cp);
        if (k == Class::Remove) continue;
        if (k == Class::Space) {
            out.push_back(' ');
            run_start = out.size();
            continue;
        }
        const bool cjk = bert_unicode::is_cjk(ch.cp);
        if (cjk) {
            out.push_back(' ');
            run_start = out.size();
        }
        uint32_t stripped[3];
        const int n = bert_unicode::strip_accents(ch.cp, stripped);
        for (int i = 0; i < n; ++i) {
            uint32_t lower[2];
            const int m = bert_unicode::to_lower(stripped[i], lower);
            for (int j = 0; j < m; ++j) {
                const uint32_t c = lower[j];
                // NFD's canonical reordering: after the Mn marks are gone only a few Mc characters
                // have a non-zero class; keep each run of them sorted (stable) by class.
                const uint8_t ccc = bert_unicode::combining_class(c);
                if (ccc == 0) {
                    out.push_back(c);
                    run_start = out.size();
                    continue;
                }
                auto at = out.end();
                while (at - out.begin() > static_cast<std::ptrdiff_t>(run_start) &&
                       bert_unicode::combining_class(*(at - 1)) > ccc)
                    --at;
                out.insert(at, c);
            }
        }
        if (cjk) {
            out.push_back(' ');
            run_start = out.size();
        }
    }
}

std::string WordpieceTokenizer::normalize(std::string_view text) const {
    std::vector<uint32_t> cps;
    normalize_into(text, cps);
    std::string s;
    for (uint32_t c : cps) unicode::append_utf8(s, c);
    return s;
}

void WordpieceTokenizer::wordpiece(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                                   std::string& scratch, std::vector<int32_t>& ids) const {
    if (end - begin > kMaxWordChars) {
        ids.push_back(unk_);
        return;
    }
    // UTF-8 of the word and the byte offset of each code point (and of the end).
    std::string word;
    std::vector<size_t> at;
    at.reserve(end - begin + 1);
    for (size_t i = begin; i < end; ++i) {
        at.push_back(word.size());
        unicode::append_utf8(word, cps[i]);
    }
    at.push_back(word.size());
    const size_t n = end - begin;
    const size_t first_id = ids.size();
    size_t start = 0;
    while (start < n) {
        size_t stop = n;
        int32_t found = -1;
        for (; stop > start; --stop) {
            scratch.clear();
            if (start > 0) scratch += "##";
            scratch.append(word, at[start], at[stop] - at[start]);
            const auto it = ids_.find(scratch);
            if (it != ids_.end()) {
                found = it->second;
                break;
            }
        }
        if (found < 0) {
            ids.resize(first_id);
            ids.push_back(unk_);
            return;
        }
        ids.push_back(found);
        start = stop;
    }
}

void WordpieceTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& ids) const {
    std::vector<uint32_t> cps;
    cps.reserve(text.size() + 8);
    normalize_into(text, cps);
    std::string scratch;
    size_t word = 0;  // start of the current word
    for (size_t i = 0; i <= cps.size(); ++i) {
        const bool at_end = i == cps.size();
        if (at_end || is_space(cps[i])) {
            if (i > word) wordpiece(cps, word, i, scratch, ids);
            word = i + 1;
        } else if (is_punct(cps[i])) {
            if (i > word) wordpiece(cps, word, i, scratch, ids);
            wordpiece(cps, i, i + 1, scratch, ids);
            word = i + 1;
        }
    }
}

std::vector<int32_t> WordpieceTokenizer::encode_pieces(std::string_view text) const {
    std::vector<int32_t> ids;
    // Special tokens written in the text split it first (leftmost match; the first listed wins at
    // one position, and no two of them are prefixes of each other).
    // next[i]: where specials_[i] occurs next at or after pos (npos: nowhere), so the text is
    // searched once per special token kind and occurrence, not once per occurrence and kind.
    std::vector<size_t> next(specials_.size(), 0);
    size_t pos = 0;
    for (size_t i = 0; i < specials_.size(); ++i) next[i] = text.find(specials_[i].text);
    while (pos <= text.size()) {
        size_t best = std::string_view::npos;
        const Special* which = nullptr;
        for (size_t i = 0; i < specials_.size(); ++i) {
            if (next[i] != std::string_view::npos && next[i] < pos)
                next[i] = text.find(specials_[i].text, pos);
            if (next[i] < best) best = next[i], which = &specials_[i];
        }
        if (!which) {
            encode_plain(text.substr(pos), ids);
            break;
        }
        encode_plain(text.substr(pos, best - pos), ids);
        ids.push_back(which->id);
        pos = best + which->text.size();
    }
    return ids;
}

std::vector<int32_t> WordpieceTokenizer::encode(std::string_view text, size_t max_tokens) const {
    if (max_tokens < 2) throw Error("WordpieceTokenizer::encode: max_tokens must be at least 2");
    std::vector<int32_t> pieces = encode_pieces(text);
    if (pieces.size() > max_tokens - 2) pieces.resize(max_tokens - 2);
    std::vector<int32_t> ids;
    ids.reserve(pieces.size() + 2);
    ids.push_back(cls_);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    ids.push_back(sep_);
    return ids;
}

}  // namespace sl
