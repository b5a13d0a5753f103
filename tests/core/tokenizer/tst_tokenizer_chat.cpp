// Chat templates rendered by hand must give the strings the models' Jinja templates give. The
// SmolLM2 and Llama 3 expectations were rendered from the templates below with jinja2 3.1 (as
// transformers does); the Mistral and Llama 2 ones follow those models' published templates.
#include <QTest>

#include <string>
#include <vector>

#include "core/answer/think_filter.h"
#include "core/tokenizer/chat_template.h"

using sl::ChatFamily;
using sl::ChatMessage;
using sl::ChatTemplate;

namespace {

// tokenizer.chat_template of SmolLM2-135M-Instruct (the default model), verbatim.
const char* const kSmolLM2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2.5's default system turn (escaped newlines inside the string constant).
const char* const kQwen25 =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n    {%- endif %}";

const char* const kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\n\n' }}{% endif %}";

const std::vector<ChatMessage> kHello{{"user", "Hello!"}};
const std::vector<ChatMessage> kWithSystem{
    {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello."}, {"user", "Why?"}};

}  // namespace

class TstTokenizerChat : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void smollm2();
    void qwenDefaultSystem();
    void llama3();
    void llama31();
    void mistral();
    void llama2();
    void plain();
    void minimax();
    void thinkFilterWithholdsThinking_data();
    void thinkFilterWithholdsThinking();
};

void TstTokenizerChat::smollm2() {
    const ChatTemplate t(kSmolLM2);
    QCOMPARE(t.family(), ChatFamily::ChatML);
    QCOMPARE(t.default_system(),
             std::string("You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
    QCOMPARE(t.render(kHello, true),
             std::string("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained "
                         "by Hugging Face<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
                         "<|im_start|>assistant\n"));
    QCOMPARE(t.render(kWithSystem, false),
             std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi "
                         "<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n"
                         "Why?<|im_end|>\n"));
    QCOMPARE(t.render({}, true), std::string("<|im_start|>assistant\n"));
    QCOMPARE(t.stop_strings(), std::vector<std::string>{"<|im_end|>"});
}

void TstTokenizerChat::qwenDefaultSystem() {
    const ChatTemplate t(kQwen25);
    QCOMPARE(t.family(), ChatFamily::ChatML);
    QCOMPARE(t.default_system(),
             std::string("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."));
    // A ChatML template whose system turn only ever holds the caller's message: no default.
    const ChatTemplate bare("{{'<|im_start|>' + message['role'] + '\\n' + message['content']}}");
    QCOMPARE(bare.default_system(), std::string());
    QCOMPARE(bare.render(kHello, true),
             std::string("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"));
}

void TstTokenizerChat::llama3() {
    const ChatTemplate t(kLlama3, "<|begin_of_text|>", "<|end_of_text|>");
    QCOMPARE(t.family(), ChatFamily::Llama3);
    QCOMPARE(t.render(kWithSystem, true),
             std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                         "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                         "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"));
}

void TstTokenizerChat::llama31() {
    const ChatTemplate t(
        std::string(kLlama3) + "{{- \"Cutting Knowledge Date: December 2023\\n\" }}",
        "<|begin_of_text|>");
    QCOMPARE(t.render(kHello, true),
             std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                         "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                         "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"));
}

void TstTokenizerChat::mistral() {
    const ChatTemplate t(
        "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + "
        "message['content'] + ' [/INST]' }}{% endfor %}",
        "<s>", "</s>");
    QCOMPARE(t.family(), ChatFamily::Mistral);
    QCOMPARE(t.render(kWithSystem, true),
             std::string("<s>[INST] Be brief.\n\n Hi  [/INST]Hello.</s>[INST] Why? [/INST]"));
    QCOMPARE(t.stop_strings(), std::vector<std::string>{"</s>"});
}

void TstTokenizerChat::llama2() {
    const ChatTemplate t("{{ bos_token + '[INST] ' + '<<SYS>>\\n' }}", "<s>", "</s>");
    QCOMPARE(t.render(kWithSystem, true),
             std::string("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s>"
                         "<s>[INST] Why? [/INST]"));
}

void TstTokenizerChat::plain() {
    const ChatTemplate t("");
    QCOMPARE(t.family(), ChatFamily::Plain);
    QCOMPARE(
        t.render(kWithSystem, true),
        std::string("System: Be brief.\nUser:  Hi \nAssistant: Hello.\nUser: Why?\nAssistant:"));
}

// MiniMax-M2/M3 (its published template's turn markers): the assistant is "ai", and the generation
// prompt opens a thinking block.
void TstTokenizerChat::minimax() {
    const ChatTemplate t("{{- ']~!b[' ~ ']~b]system' ~ '\\n' }}{{ ']~b]ai' ~ '\\n' ~ '<think>' ~ '\\n' }}");
    QCOMPARE(t.family(), ChatFamily::MiniMax);
    QVERIFY(t.thinks() && t.opens_thinking());
    QCOMPARE(t.render(kWithSystem, true),
             std::string("]~!b[]~b]system\nBe brief.[e~[\n]~b]user\n Hi [e~[\n]~b]ai\nHello.[e~[\n"
                         "]~b]user\nWhy?[e~[\n]~b]ai\n<think>\n"));
    QCOMPARE(t.stop_strings(), std::vector<std::string>{"[e~["});
    QVERIFY(!ChatTemplate(kSmolLM2).thinks());
    const ChatTemplate qwen3("<|im_start|>assistant\n<think>\n\n</think>");
    QVERIFY(qwen3.thinks() && !qwen3.opens_thinking());
}

void TstTokenizerChat::thinkFilterWithholdsThinking_data() {
    QTest::addColumn<bool>("opened");
    QTest::addColumn<QString>("generated");
    QTest::addColumn<QString>("answer");
    QTest::addColumn<QString>("thoughts");
    QTest::newRow("opened by the prompt") << true << QStringLiteral("Look at p. 3.\n</think>\n\nOn page 3.") << QStringLiteral("On page 3.") << QStringLiteral("Look at p. 3.\n");
    QTest::newRow("a block in the answer") << false << QStringLiteral("<think>hmm</think> Yes. <think>again</think>No.") << QStringLiteral("Yes. No.") << QStringLiteral("hmmagain");
    QTest::newRow("no block") << false << QStringLiteral("a < b and c <th d") << QStringLiteral("a < b and c <th d") << QString();
    QTest::newRow("never closed") << true << QStringLiteral("thinking on and on </thi") << QString() << QStringLiteral("thinking on and on </thi");
}

void TstTokenizerChat::thinkFilterWithholdsThinking() {
    // Every way of cutting the text into pieces (tags split anywhere) gives the same answer.
    QFETCH(bool, opened);
    QFETCH(QString, generated);
    QFETCH(QString, answer);
    QFETCH(QString, thoughts);
    const std::string g = generated.toStdString();
    for (size_t step = 1; step <= g.size(); ++step) {
        sl::ThinkFilter f(opened);
        std::string out;
        for (size_t i = 0; i < g.size(); i += step) out += f.feed(std::string_view(g).substr(i, step));
        out += f.finish();
        QCOMPARE(QString::fromStdString(out), answer);
        QCOMPARE(QString::fromStdString(f.thoughts()), thoughts);
    }
}

QTEST_APPLESS_MAIN(TstTokenizerChat)
#include "tst_tokenizer_chat.moc"
