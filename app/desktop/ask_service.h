// The seam between the chat pane and what answers questions: the app's LibraryAnswerService (the
// core's sl::ask over the library store, library_answer_service.h), PausingAnswerService around
// it (prefill_gate.h), and scripted services in the tests.
//
// Threading: answer() runs on a worker thread (the chat pane calls it through QtConcurrent) and
// never touches widgets; the stream's callbacks run on that worker thread. One answer() at a time
// per service.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include "app/desktop/chat_answer.h"
#include "core/context/effort.h"

namespace sl::desktop {

// What an answer reports while it runs. Either may be empty.
struct AskStream {
    std::function<void(std::string_view)> on_text;  // the answer's text as it streams (no markers)
    std::function<void(const std::string&)> on_status;  // progress before the answer starts
};

class AskService {
public:
    virtual ~AskService() = default;
    virtual std::string name() const = 0;
    // Answers `question` from the library. The returned ChatAnswer holds the whole answer with
    // its citations and is finished. When *cancel becomes true it returns early with the text so
    // far (answer.stop_reason "cancelled"). Throws sl::Error (no model, no ready document, ...).
    virtual ChatAnswer answer(const std::string& question, Effort effort, const AskStream& stream,
                              const std::atomic<bool>* cancel) = 0;
    // One short slice (tens of milliseconds) of idle-time work between answers, on the worker
    // thread answer() runs on, never while it runs: the chat pane calls it after an answer until
    // it returns false or the next question comes. The app's service brings a GPU session's
    // context from its saved file onto the device (sl::WarmContext::fill). Default: nothing.
    virtual bool idle() { return false; }
};

}  // namespace sl::desktop
