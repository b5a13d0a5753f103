// libFuzzer target for the tokenizers (byte-level BPE "gpt2", SentencePiece "llama"), their
// pre-tokenizers and special-token splitting, and the chat template renderer. Building a tokenizer
// from any vocabulary either works or throws sl::FormatError; encoding any bytes gives ids inside
// the vocabulary that decode without throwing; anything else (a crash, a sanitizer report, another
// exception, a hang) is a bug.
//
// Input: one flags byte, then
// - flags & 0x80 clear: the rest is text, encoded by a tokenizer built once from a small synthetic
//   vocabulary (fast; most runs). Byte-level BPE must give the text back exactly (every byte has a
//   token there), so decode(encode(text)) == text is checked too.
// - flags & 0x80 set: the rest is a whole tokenizer description, sections split by "\n--\n":
//   tokens (one a line, a leading digit 0-6 is its TokenType), merges (one a line), the chat
//   template text, the text to encode. A second flags byte (the first of the tokens section is
//   kept) picks bos/eos/unk ids.
// Flags: bit 0 model (gpt2 / llama), bits 1-2 pre-tokenizer (smollm, llama-bpe, qwen2, gpt2),
// bit 3 add_bos, bit 4 add_eos, bit 5 add_space_prefix (SentencePiece) or the o200k pre-tokenizer
// ("minimax-m2", byte-level BPE), bit 6 parse_special.
// Seeds: tests/fuzz/corpus/fuzz_tokenizer (written by tests/fuzz/make_seeds.py).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/bpe_gpt2.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace {

constexpr const char* kPre[] = {"smollm", "llama-bpe", "qwen2", "gpt2"};

std::vector<std::string_view> split(std::string_view s, std::string_view sep, size_t max_parts) {
    std::vector<std::string_view> out;
    while (out.size() + 1 < max_parts) {
        const size_t at = s.find(sep);
        if (at == std::string_view::npos) break;
        out.push_back(s.substr(0, at));
        s.remove_prefix(at + sep.size());
    }
    out.push_back(s);
    return out;
}

// A GPT-2 style vocabulary: the 256 byte tokens, a few merges, ChatML control tokens and one
// user-defined token.
sl::TokenizerData synthetic_gpt2(uint8_t flags) {
    sl::TokenizerData d;
    d.name = "synthetic-gpt2";
    d.model = "gpt2";
    d.pre = (flags & 0x20) ? "minimax-m2" : kPre[(flags >> 1) & 3];  // bit 5: the o200k pattern
    for (int b = 0; b < 256; ++b) {
        d.tokens.push_back(sl::bpe::bytes_to_vocab_text(std::string(1, static_cast<char>(b))));
        d.token_types.push_back(1);
    }
    const char* merges[] = {"Ġ t", "h e", "i n", "Ġt he", "Ġ a", "e r", "o n", "Ġ s", "r e",
                            "Ġ w", "a t", "e n", "Ġ c", "i t", "i s", "Ġ 1", "1 2", "Ġ Ġ",
                            "ĠĠ ĠĠ", "Ċ Ċ", "Ã ©"};
    for (const char* m : merges) {
        d.merges.emplace_back(m);
        const std::string_view mv(m);
        const size_t sp = mv.find(' ');
        d.tokens.push_back(std::string(mv.substr(0, sp)) + std::string(mv.substr(sp + 1)));
        d.token_types.push_back(1);
    }
    d.bos_id = static_cast<int32_t>(d.tokens.size()) + 1;  // <|im_start|>
    d.eos_id = d.bos_id + 1;                                // <|im_end|>
    for (const char* c : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
        d.tokens.emplace_back(c);
        d.token_types.push_back(3);
    }
    d.tokens.emplace_back("<tool>");
    d.token_types.push_back(4);
    d.add_bos = flags & 0x08;
    d.add_eos = flags & 0x10;
    d.chat_template = "{% for m in messages %}<|im_start|>{{m.role}}\n{{m.content}}<|im_end|>\n";
    return d;
}

// A SentencePiece vocabulary: unk, bos, eos, the 256 byte tokens, some pieces with scores.
sl::TokenizerData synthetic_spm(uint8_t flags) {
    sl::TokenizerData d;
    d.name = "synthetic-spm";
    d.model = "llama";
    d.tokens = {"<unk>", "<s>", "</s>"};
    d.token_types = {2, 3, 3};
    d.scores = {0, 0, 0};
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        d.tokens.emplace_back(hex);
        d.token_types.push_back(6);
        d.scores.push_back(0);
    }
    const char* pieces[] = {"\xE2\x96\x81", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "in",
                            "\xE2\x96\x81" "a", "er", "on", "\xE2\x96\x81\xE2\x96\x81", "t", "h",
                            "e", "a", "i", "n", "o", "r", "[INST]", "\xC3\xA9"};
    float score = -1;
    for (const char* p : pieces) {
        d.tokens.emplace_back(p);
        d.token_types.push_back(std::string_view(p) == "[INST]" ? 3 : 1);
        d.scores.push_back(score);
        score -= 0.5f;
    }
    d.unk_id = 0;
    d.bos_id = 1;
    d.eos_id = 2;
    d.add_bos = flags & 0x08;
    d.add_eos = flags & 0x10;
    d.add_space_prefix = flags & 0x20;
    d.chat_template = "[INST] {{ messages[0].content }} [/INST]";
    return d;
}

const sl::Tokenizer& synthetic(uint8_t flags) {
    // One tokenizer per (model, pre-tokenizer, add_bos, add_eos, add_space_prefix): flags & 0x3F.
    static std::array<std::unique_ptr<sl::Tokenizer>, 64> cache;
    auto& t = cache[flags & 0x3F];
    if (!t) t = sl::Tokenizer::create((flags & 1) ? synthetic_spm(flags) : synthetic_gpt2(flags));
    return *t;
}

void check_ids(const sl::Tokenizer& tok, const std::vector<int32_t>& ids, size_t text_size) {
    // At most a few tokens per input byte: SentencePiece writes a space as U+2581 (three byte
    // tokens without a piece for it) and puts one after each special token; plus BOS and EOS.
    if (ids.size() > 4 * text_size + 4) __builtin_trap();
    for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
}

void exercise(const sl::Tokenizer& tok, std::string_view text, uint8_t flags, bool roundtrip) {
    const bool parse_special = flags & 0x40;
    const std::vector<int32_t> ids = tok.encode(text, true, parse_special);
    check_ids(tok, ids, text.size());
    const std::string shown = tok.decode(ids, false);
    const std::string all = tok.decode(ids, true);
    volatile size_t sink = shown.size() + all.size();
    for (int32_t id : ids) sink = sink + tok.piece(id).size() + tok.is_end_of_generation(id);
    if (roundtrip) {
        const std::vector<int32_t> plain = tok.encode(text, false, false);
        check_ids(tok, plain, text.size());
        if (tok.decode(plain, true) != text) __builtin_trap();
    }

    // The chat template of the tokenizer's model, with the text as messages.
    const sl::ChatTemplate chat = sl::ChatTemplate::for_tokenizer(tok);
    std::vector<sl::ChatMessage> messages;
    const char* roles[] = {"system", "user", "assistant", "user"};
    size_t r = (flags & 0x20) ? 1 : 0;
    for (const std::string_view part : split(text, "\n\n", 8))
        messages.push_back({roles[r++ % 4], std::string(part)});
    const std::string prompt = chat.render(messages, flags & 0x10);
    check_ids(tok, tok.encode(prompt, false, true), prompt.size());
    for (const std::string& stop : chat.stop_strings()) sink = sink + stop.size();
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    if (!(flags & 0x80)) {
        const sl::Tokenizer& tok = synthetic(flags);
        exercise(tok, rest, flags, !(flags & 1));
        return 0;
    }

    // A tokenizer from the input's own vocabulary.
    const std::vector<std::string_view> parts = split(rest, "\n--\n", 4);
    sl::TokenizerData d;
    d.name = "fuzz";
    d.model = (flags & 1) ? "llama" : "gpt2";
    d.pre = kPre[(flags >> 1) & 3];
    const uint8_t ids = parts[0].empty() ? 0 : static_cast<uint8_t>(parts[0][0]);
    for (const std::string_view line : split(parts[0].empty() ? parts[0] : parts[0].substr(1), "\n",
                                            4096)) {
        int32_t type = 1;
        std::string_view text = line;
        if (!text.empty() && text[0] >= '0' && text[0] <= '6') {
            type = text[0] - '0';
            text.remove_prefix(1);
        }
        d.tokens.emplace_back(text);
        d.token_types.push_back(type);
        d.scores.push_back(-static_cast<float>(d.scores.size()));
    }
    if (parts.size() > 1)
        for (const std::string_view m : split(parts[1], "\n", 4096))
            if (!m.empty()) d.merges.emplace_back(m);
    if (parts.size() > 2) d.chat_template = std::string(parts[2]);
    const auto n = static_cast<int32_t>(d.tokens.size());
    d.bos_id = (ids & 3) == 0 ? -1 : (ids & 3) % n;
    d.eos_id = ((ids >> 2) & 3) == 0 ? -1 : ((ids >> 2) & 3) % n;
    d.unk_id = ((ids >> 4) & 3) == 0 ? -1 : ((ids >> 4) & 3) % n;
    d.add_bos = flags & 0x08;
    d.add_eos = flags & 0x10;
    d.add_space_prefix = flags & 0x20;
    std::unique_ptr<sl::Tokenizer> tok;
    try {
        tok = sl::Tokenizer::create(std::move(d));
    } catch (const sl::FormatError&) {
        return 0;
    }
    exercise(*tok, parts.size() > 3 ? parts[3] : std::string_view(), flags, false);
    return 0;
}
