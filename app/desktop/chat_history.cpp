#include "app/desktop/chat_history.h"

#include <QJsonDocument>
#include <QJsonObject>

#include "core/answer/answer_json.h"
#include "core/library/library.h"
#include "core/util/error.h"

namespace sl::desktop {

ChatAnswer chat_answer_from_record(const ChatRecord& c) {
    ChatAnswer a;
    a.answer = answer_from_json(c.citations, "chat " + std::to_string(c.id));
    if (a.answer.question.empty()) a.answer.question = c.question;
    if (a.answer.text.empty() && a.answer.sentences.empty()) a.answer.text = c.answer;
    // The settings sl::ask stored with the chat: {"model":..., "attention":"msa", "top_k":16,
    // "effort":"medium", "context_tokens":450, "read":"...", ...}.
    const QJsonObject so = QJsonDocument::fromJson(QByteArray::fromStdString(c.settings)).object();
    a.model = so.value(QStringLiteral("model")).toString().toStdString();
    a.read_summary = so.value(QStringLiteral("read")).toString().toStdString();
    a.context_tokens = so.value(QStringLiteral("context_tokens")).toInteger();
    std::string method = so.value(QStringLiteral("attention")).toString().toStdString();
    if (method == "msa") method = "one long context with MSA";
    if (so.contains(QStringLiteral("top_k")))
        method += " (top-k " + std::to_string(so.value(QStringLiteral("top_k")).toInt()) + ")";
    if (so.contains(QStringLiteral("effort")))
        method += (method.empty() ? "" : ", ") + std::string("effort ") +
                  so.value(QStringLiteral("effort")).toString().toStdString();
    const QString when = so.value(QStringLiteral("when")).toString();
    if (!when.isEmpty()) method += (method.empty() ? "" : "; ") + std::string("asked ") + when.toStdString();
    a.method = method;
    a.finished = true;
    return a;
}

ChatHistory load_chat_history(const std::filesystem::path& dir, int max_chats) {
    ChatHistory h;
    std::error_code ec;
    if (dir.empty() || !std::filesystem::exists(dir / "library.sqlite", ec)) return h;
    try {
        const Library lib = Library::open(dir, LibraryOpen::Existing);
        const std::vector<ChatRecord> chats = lib.list_chats();
        const size_t keep = static_cast<size_t>(std::max(0, max_chats));
        const size_t first = chats.size() > keep ? chats.size() - keep : 0;
        h.older = static_cast<int>(first);
        for (size_t i = first; i < chats.size(); ++i) {
            try {
                h.answers.push_back(chat_answer_from_record(chats[i]));
            } catch (const Error&) {
                ++h.skipped;
            }
        }
    } catch (const std::exception& e) {
        h.error = QString::fromUtf8(e.what());
    }
    return h;
}

QString clear_chat_history(const std::filesystem::path& dir) {
    std::error_code ec;
    if (dir.empty() || !std::filesystem::exists(dir / "library.sqlite", ec)) return {};
    try {
        Library lib = Library::open(dir, LibraryOpen::Existing);
        lib.remove_chats();
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

}  // namespace sl::desktop
