#include "core/embed/sentence_embedder.h"

#include <algorithm>
#include <cmath>

#include "core/embed/json.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace sl {

namespace {

std::filesystem::path need(const std::filesystem::path& dir, const char* name) {
    const auto p = dir / name;
    if (!std::filesystem::is_regular_file(p))
        throw IoError(p.string() + ": missing (the sentence-embedding model is installed by " +
                      std::string(paths::setup_command()) + ")");
    return p;
}

// max_seq_length from sentence_bert_config.json, or 256 when the file is absent.
size_t max_seq_length(const std::filesystem::path& dir) {
    const auto p = dir / "sentence_bert_config.json";
    if (!std::filesystem::exists(p)) return 256;
    const JsonValue root = JsonValue::parse_file(p, 65536);
    const JsonValue* v = root.find("max_seq_length");
    const auto n = v ? v->as_u64() : std::nullopt;
    if (!n || *n < 2 || *n > 65536)
        throw FormatError(p.string() + ": max_seq_length is not an integer in [2, 65536]");
    return static_cast<size_t>(*n);
}

// 1_Pooling/config.json, when present, must ask for what embed_batch does: mean pooling alone, at
// the encoder's width.
void check_pooling(const std::filesystem::path& dir, int hidden) {
    const auto p = dir / "1_Pooling" / "config.json";
    if (!std::filesystem::exists(p)) return;
    const JsonValue root = JsonValue::parse_file(p, 65536);
    auto flag = [&](const char* key) {
        const JsonValue* v = root.find(key);
        return v && v->type() == JsonValue::Type::Bool && v->as_bool();
    };
    if (!flag("pooling_mode_mean_tokens"))
        throw FormatError(
            p.string() + ": pooling_mode_mean_tokens is not true (only mean pooling is supported)");
    for (const char* other :
         {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
          "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
        if (flag(other))
            throw FormatError(p.string() + ": " + other + " is not supported (only mean pooling)");
    if (const JsonValue* d = root.find("word_embedding_dimension")) {
        const auto v = d->as_u64();
        if (!v || *v != static_cast<uint64_t>(hidden))
            throw FormatError(p.string() +
                              ": word_embedding_dimension is not the encoder's hidden_size " +
                              std::to_string(hidden));
    }
}

}  // namespace

std::filesystem::path SentenceEmbedder::default_dir() {
    return paths::cache_dir() / "models" / "all-MiniLM-L6-v2";
}

std::unique_ptr<SentenceEmbedder> SentenceEmbedder::open(const std::string& dir) {
    return open(dir, Options{});
}

std::unique_ptr<SentenceEmbedder> SentenceEmbedder::open(const std::string& dir,
                                                         const Options& options) {
    if (!std::filesystem::is_directory(dir))
        throw IoError(dir +
                      ": no such model directory (the sentence-embedding model is installed by " +
                      std::string(paths::setup_command()) + ")");
    return std::unique_ptr<SentenceEmbedder>(new SentenceEmbedder(dir, options));
}

SentenceEmbedder::SentenceEmbedder(const std::filesystem::path& dir, const Options& options)
    : weights_(SafetensorsFile::open(need(dir, "model.safetensors"))),
      tokenizer_(WordpieceTokenizer::from_vocab_file(need(dir, "vocab.txt"))),
      pool_(options.n_threads) {
    const BertConfig cfg = BertConfig::from_json_file(need(dir, "config.json"));
    if (tokenizer_.vocab_size() != static_cast<size_t>(cfg.vocab_size))
        throw FormatError(
            (dir / "vocab.txt").string() + ": " + std::to_string(tokenizer_.vocab_size()) +
            " tokens, but config.json says vocab_size " + std::to_string(cfg.vocab_size));
    check_pooling(dir, cfg.hidden);
    encoder_ = std::make_unique<BertEncoder>(weights_, cfg);
    max_tokens_ = options.max_tokens ? options.max_tokens : max_seq_length(dir);
    max_tokens_ =
        std::min(std::max<size_t>(max_tokens_, 2), static_cast<size_t>(cfg.max_positions));
    batch_tokens_ = std::max(options.batch_tokens, max_tokens_);
}

void SentenceEmbedder::embed_batch(std::span<const std::vector<int32_t>> seqs,
                                   std::vector<std::vector<float>>& out) {
    encoder_->forward(seqs, hidden_, pool_, scratch_);
    const auto d = static_cast<size_t>(dim());
    size_t t = 0;
    for (const auto& seq : seqs) {
        // Mean over every token of the sequence (no padding: the attention mask is all ones).
        std::vector<double> sum(d, 0.0);
        for (size_t i = 0; i < seq.size(); ++i, ++t)
            for (size_t j = 0; j < d; ++j) sum[j] += hidden_[t * d + j];
        double norm2 = 0.0;
        for (size_t j = 0; j < d; ++j) {
            sum[j] /= static_cast<double>(seq.size());
            norm2 += sum[j] * sum[j];
        }
        const double inv =
            1.0 / std::max(std::sqrt(norm2), 1e-12);  // torch.nn.functional.normalize
        std::vector<float> e(d);
        for (size_t j = 0; j < d; ++j) e[j] = static_cast<float>(sum[j] * inv);
        out.push_back(std::move(e));
    }
}

std::vector<float> SentenceEmbedder::embed(std::string_view text) {
    const std::string s(text);
    return std::move(embed(std::span<const std::string>(&s, 1)).front());
}

std::vector<std::vector<float>> SentenceEmbedder::embed(std::span<const std::string> texts) {
    std::vector<std::vector<int32_t>> seqs;
    seqs.reserve(texts.size());
    for (const auto& t : texts) seqs.push_back(tokenizer_.encode(t, max_tokens_));
    std::vector<std::vector<float>> out;
    out.reserve(texts.size());
    const std::lock_guard lock(mutex_);
    size_t begin = 0;
    while (begin < seqs.size()) {
        size_t end = begin, tokens = 0;
        while (end < seqs.size() && (end == begin || tokens + seqs[end].size() <= batch_tokens_))
            tokens += seqs[end++].size();
        embed_batch(std::span<const std::vector<int32_t>>(seqs).subspan(begin, end - begin), out);
        begin = end;
    }
    return out;
}

float SentenceEmbedder::similarity(std::span<const float> a, std::span<const float> b) {
    const size_t n = std::min(a.size(), b.size());
    double s = 0.0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(s);
}

}  // namespace sl
