#include "core/tokenizer/chat_template.h"

#include "core/tokenizer/tokenizer.h"

namespace sl {

namespace {

bool contains(std::string_view s, std::string_view what) {
    return s.find(what) != std::string_view::npos;
}

// Jinja's |trim and Python's str.strip() on ASCII white space.
std::string_view trim(std::string_view s) {
    constexpr std::string_view ws = " \t\n\r\f\v";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The literal text a ChatML template writes as its default system turn:
// '<|im_start|>system\n<literal><|im_end|>' inside a string constant. Empty when the system turn
// is built from expressions (it then only ever holds the caller's system message).
std::string chatml_default_system(std::string_view t) {
    constexpr std::string_view open = "<|im_start|>system";
    for (size_t at = t.find(open); at != std::string_view::npos; at = t.find(open, at + 1)) {
        std::string_view rest = t.substr(at + open.size());
        if (rest.starts_with("\\n"))
            rest.remove_prefix(2);
        else if (rest.starts_with("\n"))
            rest.remove_prefix(1);
        else
            continue;
        const size_t end = rest.find("<|im_end|>");
        if (end == std::string_view::npos) continue;
        const std::string_view lit = rest.substr(0, end);
        if (lit.empty() || lit.find_first_of("'\"{}+") != std::string_view::npos) continue;
        std::string out;  // undo the string constant's escapes
        for (size_t i = 0; i < lit.size(); ++i) {
            if (lit[i] == '\\' && i + 1 < lit.size()) {
                const char c = lit[++i];
                out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
            } else {
                out += lit[i];
            }
        }
        return out;
    }
    return {};
}

std::string capitalized(std::string_view role) {
    std::string r(role);
    if (!r.empty() && r[0] >= 'a' && r[0] <= 'z') r[0] = static_cast<char>(r[0] - 32);
    return r;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view t, std::string bos_text, std::string eos_text)
    : bos_(std::move(bos_text)), eos_(std::move(eos_text)) {
    if (contains(t, "<|im_start|>")) {
        family_ = ChatFamily::ChatML;
        default_system_ = chatml_default_system(t);
    } else if (contains(t, "<|start_header_id|>")) {
        family_ = ChatFamily::Llama3;
        llama31_ = contains(t, "Cutting Knowledge Date");
    } else if (contains(t, "[INST]")) {
        family_ = ChatFamily::Mistral;
        llama2_sys_ = contains(t, "<<SYS>>");
    } else if (contains(t, "]~b]")) {
        family_ = ChatFamily::MiniMax;
    }
    thinks_ = family_ == ChatFamily::MiniMax || contains(t, "<think>");
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tok) {
    const TokenizerData& d = tok.data();
    auto text = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
    return ChatTemplate(d.chat_template, text(d.bos_id), text(d.eos_id));
}

std::string ChatTemplate::render(std::span<const ChatMessage> m, bool gen) const {
    switch (family_) {
        case ChatFamily::ChatML:
            return render_chatml(m, gen);
        case ChatFamily::Llama3:
            return render_llama3(m, gen);
        case ChatFamily::Mistral:
            return render_mistral(m, gen);
        case ChatFamily::MiniMax:
            return render_minimax(m, gen);
        case ChatFamily::Plain:
            break;
    }
    return render_plain(m, gen);
}

std::vector<std::string> ChatTemplate::stop_strings() const {
    switch (family_) {
        case ChatFamily::ChatML:
            return {"<|im_end|>"};
        case ChatFamily::Llama3:
            return {"<|eot_id|>", "<|eom_id|>"};
        case ChatFamily::Mistral:
            return eos_.empty() ? std::vector<std::string>{"</s>"} : std::vector<std::string>{eos_};
        case ChatFamily::MiniMax:
            return {"[e~["};
        case ChatFamily::Plain:
            break;
    }
    return {"\nUser:"};
}

// SmolLM2 / Qwen2.5: the default system turn first when messages[0] is not a system message.
std::string ChatTemplate::render_chatml(std::span<const ChatMessage> m, bool gen) const {
    std::string out;
    for (size_t i = 0; i < m.size(); ++i) {
        if (i == 0 && m[0].role != "system" && !default_system_.empty()) {
            out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
        }
        out += "<|im_start|>" + m[i].role + "\n" + m[i].content + "<|im_end|>\n";
    }
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

// Llama 3: BOS, then each turn with its content trimmed. Llama 3.1+ always opens with a system
// turn carrying the knowledge-date lines (the template's default date: 26 Jul 2024).
std::string ChatTemplate::render_llama3(std::span<const ChatMessage> m, bool gen) const {
    auto turn = [](std::string_view role, std::string_view content) {
        std::string t = "<|start_header_id|>";
        t.append(role).append("<|end_header_id|>\n\n").append(trim(content)).append("<|eot_id|>");
        return t;
    };
    std::string out = bos_;
    size_t first = 0;
    if (llama31_) {
        std::string_view sys;
        if (!m.empty() && m[0].role == "system") {
            sys = m[0].content;
            first = 1;
        }
        out.append("<|start_header_id|>system<|end_header_id|>\n\n")
            .append("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n")
            .append(trim(sys))
            .append("<|eot_id|>");
    }
    for (size_t i = first; i < m.size(); ++i) out += turn(m[i].role, m[i].content);
    if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// Mistral: BOS [INST] user [/INST]assistant</s>[INST] ...; a system message is put before the
// first user message ("\n\n"). Llama 2 (<<SYS>>): BOS before every [INST], the system prompt in
// <<SYS>> tags, contents stripped, " assistant </s>".
std::string ChatTemplate::render_mistral(std::span<const ChatMessage> m, bool /*gen*/) const {
    std::string system;
    size_t first = 0;
    if (!m.empty() && m[0].role == "system") {
        system = m[0].content;
        first = 1;
    }
    std::string out = llama2_sys_ ? std::string() : bos_;
    bool first_user = true;
    for (size_t i = first; i < m.size(); ++i) {
        const ChatMessage& msg = m[i];
        if (msg.role == "user") {
            std::string content = msg.content;
            if (first_user && !system.empty()) {
                content = llama2_sys_ ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
                                      : system + "\n\n" + content;
            }
            first_user = false;
            if (llama2_sys_)
                out.append(bos_).append("[INST] ").append(trim(content));
            else
                out.append("[INST] ").append(content);
            out.append(" [/INST]");
        } else if (msg.role == "assistant") {
            if (llama2_sys_)
                out.append(" ").append(trim(msg.content)).append(" ");
            else
                out.append(msg.content);
            out.append(eos_);
        }
    }
    return out;  // the assistant's turn starts right after [/INST]: nothing to add
}

// MiniMax-M2/M3: "]~!b[" once, then "]~b]" role "\n" content "[e~[\n" per turn, the assistant's role
// written "ai"; the generation prompt opens the assistant's turn and its thinking block.
std::string ChatTemplate::render_minimax(std::span<const ChatMessage> m, bool gen) const {
    std::string out = "]~!b[";
    for (const ChatMessage& msg : m)
        out += "]~b]" + (msg.role == "assistant" ? std::string("ai") : msg.role) + "\n" + msg.content + "[e~[\n";
    if (gen) out += "]~b]ai\n<think>\n";
    return out;
}

std::string ChatTemplate::render_plain(std::span<const ChatMessage> m, bool gen) const {
    std::string out;
    for (const ChatMessage& msg : m) out += capitalized(msg.role) + ": " + msg.content + "\n";
    if (gen) out += "Assistant:";
    return out;
}

}  // namespace sl
