// Chat prompts without a Jinja engine: the family of a model's chat template is recognised from its
// text and rendered by hand, producing the same string the Jinja template produces for plain
// {role, content} conversations (no tools, no images).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sl {

class Tokenizer;

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

enum class ChatFamily {
    ChatML,   // <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen2/2.5)
    Llama3,   // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
    Mistral,  // [INST] user [/INST]assistant</s> (Mistral; Llama 2 with <<SYS>>)
    MiniMax,  // ]~!b[]~b]role\ncontent[e~[\n, the assistant is "ai" (MiniMax-M2/M3)
    Plain,    // "User: ...\nAssistant:" for models without a recognised template
};

class ChatTemplate {
public:
    // Recognises `template_text` (tokenizer.chat_template): ChatML if it contains "<|im_start|>",
    // Llama 3 if "<|start_header_id|>", Mistral if "[INST]", MiniMax if "]~b]", else Plain. bos_text / eos_text are
    // the texts of the BOS / EOS tokens, which Llama 3 and Mistral templates write.
    explicit ChatTemplate(std::string_view template_text, std::string bos_text = {},
                          std::string eos_text = {});

    // The template of `tok`'s model (its chat_template, BOS and EOS texts).
    static ChatTemplate for_tokenizer(const Tokenizer& tok);

    ChatFamily family() const { return family_; }

    // The system prompt the template inserts when the conversation starts without one (SmolLM2:
    // "You are a helpful AI assistant named SmolLM, trained by Hugging Face"); empty when none.
    const std::string& default_system() const { return default_system_; }

    // The prompt for `messages`; add_generation_prompt appends the opening of the assistant's
    // turn. Encode the result with parse_special = true and add_special = false (the BOS text is
    // part of it where the template writes one).
    std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

    // Texts that end the assistant's turn, for stopping generation (e.g. "<|im_end|>").
    std::vector<std::string> stop_strings() const;

    // A reasoning model's template: the answer may hold a <think>...</think> block, which is kept
    // out of what the user sees (core/answer/think_filter.h). opens_thinking(): the generation
    // prompt itself ends inside that block (MiniMax writes "<think>\n" after "]~b]ai\n").
    bool thinks() const { return thinks_; }
    bool opens_thinking() const { return family_ == ChatFamily::MiniMax; }

private:
    std::string render_chatml(std::span<const ChatMessage> m, bool gen) const;
    std::string render_llama3(std::span<const ChatMessage> m, bool gen) const;
    std::string render_mistral(std::span<const ChatMessage> m, bool gen) const;
    std::string render_plain(std::span<const ChatMessage> m, bool gen) const;
    std::string render_minimax(std::span<const ChatMessage> m, bool gen) const;

    ChatFamily family_ = ChatFamily::Plain;
    std::string bos_;
    std::string eos_;
    std::string default_system_;
    bool llama31_ = false;     // Llama 3.1+: always a system turn with the knowledge-date lines
    bool llama2_sys_ = false;  // Llama 2: the system prompt goes in <<SYS>> inside the first [INST]
    bool thinks_ = false;      // the template writes <think> blocks
};

}  // namespace sl
