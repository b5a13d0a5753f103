// The chat pane: a question box, the transcript of answers streamed as they are generated (with
// the pipeline's progress until the text starts), citation markers as links and chips under the
// latest answer (weak ones flagged; a chip's tooltip says which sentences it backs and how well),
// Stop, and Copy (answer with its sources). What each answer shows is answer_format.h's rendering
// of the core's sl::Answer (chat_answer.h).
//
// Answers run on a worker thread through QtConcurrent + QPromise: the worker calls
// AskService::answer() and reports text pieces and status lines as promise results; the watcher
// delivers them here, on the GUI thread, the only thread that touches the widgets and answers_.
// Between answers the same worker runs the service's idle() slices (AskService::idle).
// The library model must outlive the pane; the service is shared with the worker.
#pragma once

#include <QFutureWatcher>
#include <QThreadPool>
#include <QWidget>

#include <atomic>
#include <memory>
#include <vector>

#include "app/desktop/ask_service.h"

class QLabel;
class QLineEdit;
class QTextBrowser;
class QToolButton;

namespace sl::desktop {

class ChipArea;
class LibraryModel;

// One step of an answer as the worker reports it: a piece of text, a status line, or the end
// (answer or error).
struct AnswerEvent {
    QString piece;
    QString status;
    std::shared_ptr<ChatAnswer> done;  // set on the last event
};

class ChatPane : public QWidget {
    Q_OBJECT

public:
    ChatPane(LibraryModel* library, QWidget* parent = nullptr);
    ~ChatPane() override;  // stops a running answer and waits for it

    // The service answers; null: asking shows `unavailable` as the reason instead.
    void setService(std::shared_ptr<AskService> service, const QString& unavailable = {});
    void setEffort(Effort effort) { effort_ = effort; }
    Effort effort() const { return effort_; }

    // Asks `question` about the ready documents (as if typed and sent).
    void ask(const QString& question);
    void stop();
    bool busy() const { return watcher_ != nullptr; }

    const std::vector<ChatAnswer>& answers() const { return answers_; }
    // Adds a finished answer (tests) and shows it.
    void addAnswer(const ChatAnswer& answer);
    // Puts the answers of earlier sessions (the library's chat history, oldest first) before
    // those of this session and shows them.
    void restoreAnswers(std::vector<ChatAnswer> earlier);
    // Forgets every answer; false (and nothing forgotten) while an answer runs.
    bool clearAnswers();
    // Copies the latest (or `index`th) answer with its citations to the clipboard.
    void copyAnswer(int index = -1);
    // Opens citation `number` of answer `index` (what clicking a link or chip does).
    void activateCitation(int index, int number);

    QTextBrowser* transcript() const { return transcript_; }
    QWidget* chipBar() const;  // the chips of the latest answer (wrapping, scrolling past 3 rows)
    QLineEdit* questionEdit() const { return question_; }

Q_SIGNALS:
    void citationActivated(const sl::Citation& citation, int answer_index);
    void answerStarted();
    void answerFinished(int index);
    void clearRequested();  // the Clear button: the window asks, then clears (clearAnswers)
    void planRequested(int answer_index);  // the "context plan" link under an answer

protected:
    void changeEvent(QEvent* event) override;  // re-renders for a new (light/dark) palette

private:
    void send();
    void onResults(int begin, int end);
    void onFinished();
    void render();
    void rebuildChips();
    void updateButtons();

    LibraryModel* library_;
    std::shared_ptr<AskService> service_;
    QString unavailable_;
    Effort effort_ = Effort::Medium;
    std::vector<ChatAnswer> answers_;
    QThreadPool pool_;
    QFutureWatcher<AnswerEvent>* watcher_ = nullptr;
    std::shared_ptr<std::atomic<bool>> cancel_;
    // Idle time after an answer: the service's idle() slices run on pool_ until it has none or
    // this is set (by the next question, which queues behind the slice in flight, or the pane's end).
    std::shared_ptr<std::atomic<bool>> idle_stop_;
    void startIdle();

    QTextBrowser* transcript_;
    ChipArea* chips_;
    QLineEdit* question_;
    QToolButton* ask_;
    QToolButton* stop_;
    QToolButton* copy_;
    QToolButton* clear_;
};

}  // namespace sl::desktop
