#include "core/whisper/whisper_tokenizer.h"

#include <fstream>
#include <string>
#include <vector>

#include "core/embed/json.h"
#include "core/util/error.h"

namespace sl::whisper {

namespace {

// vocabulary.txt: one token per line (older CTranslate2 conversions).
std::vector<std::string> read_vocabulary_txt(const std::filesystem::path& vocab, int n_vocab) {
    std::ifstream in(vocab, std::ios::binary);
    if (!in) throw IoError(vocab.string() + ": cannot open");
    std::vector<std::string> tokens;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (tokens.size() >= static_cast<size_t>(n_vocab)) {
            throw FormatError(vocab.string() + ": more than the model's " +
                              std::to_string(n_vocab) + " tokens");
        }
        tokens.push_back(line);
    }
    if (in.bad()) throw IoError(vocab.string() + ": read error");
    return tokens;
}

// vocabulary.json: a JSON array of the tokens (newer conversions).
std::vector<std::string> read_vocabulary_json(const std::filesystem::path& vocab) {
    const JsonValue root = JsonValue::parse_file(vocab, 64u << 20);
    if (!root.is_array()) throw FormatError(vocab.string() + ": not a JSON array of tokens");
    std::vector<std::string> tokens;
    tokens.reserve(root.items().size());
    for (const JsonValue& t : root.items()) {
        if (!t.is_string()) throw FormatError(vocab.string() + ": a token is not a string");
        tokens.push_back(t.text());
    }
    return tokens;
}

}  // namespace

WhisperTokenizer WhisperTokenizer::open(const std::filesystem::path& dir, int n_vocab, int eot) {
    const bool txt = std::filesystem::exists(dir / "vocabulary.txt") ||
                     !std::filesystem::exists(dir / "vocabulary.json");
    const std::filesystem::path vocab = dir / (txt ? "vocabulary.txt" : "vocabulary.json");
    TokenizerData data;
    data.name = vocab.string();
    data.model = "gpt2";
    data.pre = "gpt2";
    data.tokens = txt ? read_vocabulary_txt(vocab, n_vocab) : read_vocabulary_json(vocab);
    if (data.tokens.size() != static_cast<size_t>(n_vocab)) {
        throw FormatError(vocab.string() + ": " + std::to_string(data.tokens.size()) +
                          " tokens, but the model has " + std::to_string(n_vocab));
    }
    if (eot < 0 || eot >= n_vocab || data.tokens[static_cast<size_t>(eot)] != "<|endoftext|>") {
        throw FormatError(vocab.string() + ": token " + std::to_string(eot) +
                          " is not <|endoftext|>");
    }
    data.token_types.assign(data.tokens.size(), static_cast<int32_t>(TokenType::Normal));
    for (size_t i = static_cast<size_t>(eot); i < data.tokens.size(); ++i)
        data.token_types[i] = static_cast<int32_t>(TokenType::Control);
    data.eos_id = eot;

    const std::filesystem::path tj = dir / "tokenizer.json";
    const JsonValue root = JsonValue::parse_file(tj, 64u << 20);
    const JsonValue* model = root.find("model");
    const JsonValue* merges = model ? model->find("merges") : nullptr;
    if (!merges || !merges->is_array()) throw FormatError(tj.string() + ": no model.merges array");
    data.merges.reserve(merges->items().size());
    for (const JsonValue& m : merges->items()) {
        if (m.is_string()) {
            data.merges.push_back(m.text());
        } else if (m.is_array() && m.items().size() == 2 && m.items()[0].is_string() &&
                   m.items()[1].is_string()) {  // newer tokenizers write ["a", "b"]
            data.merges.push_back(m.items()[0].text() + " " + m.items()[1].text());
        } else {
            throw FormatError(tj.string() + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
        }
    }
    WhisperTokenizer t;
    t.bpe_ = Tokenizer::create(std::move(data));
    t.eot_ = eot;
    return t;
}

std::vector<int> WhisperTokenizer::encode(std::string_view text) const {
    const std::vector<int32_t> ids = bpe_->encode(text, false, false);
    return {ids.begin(), ids.end()};
}

int WhisperTokenizer::find(std::string_view token) const {
    return bpe_->find_token(token);
}

std::string WhisperTokenizer::decode_text(std::span<const int> ids) const {
    std::string out;
    for (const int id : ids)
        if (id >= 0 && id < eot_) out += bpe_->piece(id);
    return out;
}

}  // namespace sl::whisper
