#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/tokenizer/tokenizer_factories.h"
#include "core/util/error.h"

namespace sl {

namespace {

std::string label(const TokenizerData& d) {
    return d.name.empty() ? "tokenizer" : d.name;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(TokenizerData data) {
    if (data.model == "gpt2") return detail::make_bpe_gpt2(std::move(data));
    if (data.model == "llama") return detail::make_spm(std::move(data));
    throw FormatError(label(data) + ": unknown tokenizer model '" + data.model + "'");
}

Tokenizer::Tokenizer(TokenizerData data) : data_(std::move(data)) {
    const size_t n = data_.tokens.size();
    const std::string who = label(data_);
    if (n == 0) throw FormatError(who + ": the vocabulary is empty");
    if (n > static_cast<size_t>(INT32_MAX)) throw FormatError(who + ": vocabulary too large");
    if (!data_.token_types.empty() && data_.token_types.size() != n) {
        throw FormatError(who + ": " + std::to_string(data_.token_types.size()) +
                          " token types for " + std::to_string(n) + " tokens");
    }
    if (!data_.scores.empty() && data_.scores.size() != n) {
        throw FormatError(who + ": " + std::to_string(data_.scores.size()) + " scores for " +
                          std::to_string(n) + " tokens");
    }
    for (const auto& [what, id] : {std::pair{"bos", data_.bos_id},
                                   {"eos", data_.eos_id},
                                   {"eot", data_.eot_id},
                                   {"unk", data_.unk_id},
                                   {"pad", data_.pad_id}}) {
        if (id < -1 || id >= static_cast<int32_t>(n)) {
            throw FormatError(who + ": " + what + " token id " + std::to_string(id) +
                              " is outside the vocabulary of " + std::to_string(n));
        }
    }
    if (data_.token_types.empty()) data_.token_types.assign(n, int32_t(TokenType::Normal));

    ids_.reserve(n);
    for (size_t i = 0; i < n; ++i) ids_.emplace(data_.tokens[i], static_cast<int32_t>(i));

    for (size_t i = 0; i < n; ++i) {
        const auto t = static_cast<TokenType>(data_.token_types[i]);
        const std::string& s = data_.tokens[i];
        if (s.empty()) continue;
        if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) {
            special_by_byte_[static_cast<uint8_t>(s[0])].push_back(static_cast<int32_t>(i));
        }
    }
    for (auto& v : special_by_byte_) {
        std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) {
            return data_.tokens[a].size() > data_.tokens[b].size();
        });
    }

    for (int32_t id : {data_.eos_id, data_.eot_id}) {
        if (id >= 0) end_of_generation_.push_back(id);
    }
    for (const char* s : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",
                          "<|endoftext|>", "</s>", "<|end|>"}) {
        const int32_t id = find_token(s);
        if (id >= 0 && type(id) == TokenType::Control) end_of_generation_.push_back(id);
    }
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size()) {
        throw Error(label(data_) + ": token id " + std::to_string(id) +
                    " is outside the vocabulary of " + std::to_string(vocab_size()));
    }
}

std::string_view Tokenizer::piece(int32_t id) const {
    check_id(id);
    return pieces_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
    std::string out;
    bool first = true;
    for (int32_t id : ids) {
        check_id(id);
        if (!render_special && is_control(id)) continue;
        std::string_view p = pieces_[static_cast<size_t>(id)];
        // SentencePiece: drop the space that add_space_prefix put before the text.
        if (first && strip_leading_space_ && type(id) == TokenType::Normal && p.starts_with(' ')) {
            p.remove_prefix(1);
        }
        first = false;
        out += p;
    }
    return out;
}

int32_t Tokenizer::find_token(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
}

TokenType Tokenizer::type(int32_t id) const {
    check_id(id);
    return static_cast<TokenType>(data_.token_types[static_cast<size_t>(id)]);
}

bool Tokenizer::is_control(int32_t id) const {
    const TokenType t = type(id);
    return t == TokenType::Control || t == TokenType::Unknown || t == TokenType::Unused;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
    return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
           end_of_generation_.end();
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return data_.tokens[static_cast<size_t>(id)];
}

std::vector<Tokenizer::Segment> Tokenizer::split_special(std::string_view text,
                                                         bool parse_special) const {
    std::vector<Segment> out;
    size_t plain = 0;  // start of the pending plain run
    for (size_t pos = 0; pos < text.size();) {
        const auto& cands = special_by_byte_[static_cast<uint8_t>(text[pos])];
        int32_t hit = -1;
        for (int32_t id : cands) {
            if (!parse_special && data_.token_types[static_cast<size_t>(id)] !=
                                      static_cast<int32_t>(TokenType::UserDefined)) {
                continue;
            }
            const std::string& s = data_.tokens[static_cast<size_t>(id)];
            if (s.size() <= text.size() - pos &&
                std::memcmp(s.data(), text.data() + pos, s.size()) == 0) {
                hit = id;
                break;  // candidates are longest first
            }
        }
        if (hit < 0) {
            ++pos;
            continue;
        }
        if (pos > plain) out.push_back({text.substr(plain, pos - plain), -1});
        const size_t len = data_.tokens[static_cast<size_t>(hit)].size();
        out.push_back({text.substr(pos, len), hit});
        pos += len;
        plain = pos;
    }
    if (plain < text.size()) out.push_back({text.substr(plain), -1});
    return out;
}

void Tokenizer::add_special_tokens(std::vector<int32_t>& ids) const {
    if (data_.add_bos && data_.bos_id >= 0) {
        std::vector<int32_t> with_bos;
        with_bos.reserve(ids.size() + 2);
        with_bos.push_back(data_.bos_id);
        with_bos.insert(with_bos.end(), ids.begin(), ids.end());
        ids = std::move(with_bos);
    }
    if (data_.add_eos && data_.eos_id >= 0) ids.push_back(data_.eos_id);
}

}  // namespace sl
