// The chat history the library keeps (sl::ask records every answer in its chats table, with the
// whole answer as JSON): read back as ChatAnswers for the chat pane when the app starts, and
// cleared when the user asks. Free of widgets.
//
// Threading: each function opens its own connection to the library and may run on any thread;
// the app calls them on a worker (QtConcurrent) so that the GUI never waits on SQLite.
#pragma once

#include <QString>

#include <filesystem>
#include <vector>

#include "app/desktop/chat_answer.h"

namespace sl {
struct ChatRecord;
}

namespace sl::desktop {

// One stored chat as the chat shows it: question, text, sentences, citations (answer_json.h) and,
// from its settings, the model, how it was answered, what it read and the context's size.
// Throws sl::FormatError when the stored answer is not an answer.
ChatAnswer chat_answer_from_record(const ChatRecord& record);

struct ChatHistory {
    std::vector<ChatAnswer> answers;  // oldest first
    int skipped = 0;                  // stored chats that could not be read (damaged JSON)
    int older = 0;                    // chats older than the last `max_chats`, not loaded
    QString error;                    // the library could not be read; empty when it was
};

// The last `max_chats` chats of the library in `dir` (none when it has no library yet).
ChatHistory load_chat_history(const std::filesystem::path& dir, int max_chats = 200);

// Removes every chat from the library in `dir`; returns an error message, empty on success.
QString clear_chat_history(const std::filesystem::path& dir);

}  // namespace sl::desktop
