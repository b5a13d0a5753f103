#include "app/desktop/chat_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPromise>
#include <QScrollBar>
#include <QStyleHints>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <chrono>

#include "app/desktop/answer_format.h"
#include "app/desktop/plan_dialog.h"
#include "app/desktop/chip_area.h"
#include "app/desktop/flow_layout.h"
#include "app/desktop/library_model.h"
#include "core/util/error.h"

namespace sl::desktop {

namespace {

bool dark_palette(const QWidget* w) {
    return w->palette().color(QPalette::Window).lightness() < 128;
}

// Runs on a worker thread; never touches widgets. Progress within one phase ("reading the
// context: 512 of 2,048 tokens", the same words up to the first digit) goes out at most every
// ~100 ms; a line of a new phase always goes out.
void run_answer(QPromise<AnswerEvent>& promise, std::shared_ptr<AskService> service, std::string question,
                Effort effort, std::shared_ptr<std::atomic<bool>> cancel) {
    auto result = std::make_shared<ChatAnswer>();
    auto last_status = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    std::string last_phase;
    AskStream stream;
    stream.on_text = [&promise, &cancel](std::string_view piece) {
        if (promise.isCanceled()) cancel->store(true);
        promise.addResult(AnswerEvent{QString::fromUtf8(piece.data(), static_cast<qsizetype>(piece.size())), {}, {}});
    };
    stream.on_status = [&promise, &cancel, &last_status, &last_phase](const std::string& line) {
        if (promise.isCanceled()) cancel->store(true);
        const auto now = std::chrono::steady_clock::now();
        std::string phase = line.substr(0, line.find_first_of("0123456789"));
        if (phase == last_phase && now - last_status < std::chrono::milliseconds(100)) return;
        last_status = now;
        last_phase = std::move(phase);
        promise.addResult(AnswerEvent{{}, QString::fromStdString(line), {}});
    };
    try {
        *result = service->answer(question, effort, stream, cancel.get());
    } catch (const std::bad_alloc&) {
        result->error = "out of memory while answering";
    } catch (const std::exception& e) {
        result->error = e.what();
    }
    if (result->answer.question.empty()) result->answer.question = question;
    result->finished = true;
    result->status.clear();
    promise.addResult(AnswerEvent{{}, {}, result});
}

QToolButton* button(QWidget* parent, const QString& icon, const QString& text, const QString& tip) {
    auto* b = new QToolButton(parent);
    b->setIcon(QIcon(icon));
    b->setText(text);
    b->setToolTip(tip);
    b->setAccessibleName(text);
    b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    b->setAutoRaise(true);
    return b;
}

}  // namespace

ChatPane::ChatPane(LibraryModel* library, QWidget* parent) : QWidget(parent), library_(library) {
    setAccessibleName(tr("Chat"));
    pool_.setMaxThreadCount(1);
    transcript_ = new QTextBrowser(this);
    transcript_->setAccessibleName(tr("Answers"));
    transcript_->setOpenLinks(false);
    transcript_->setPlaceholderText(tr("Ask a question about the documents in your library. "
                                       "Answers cite the page, slide or second they come from."));
    chips_ = new ChipArea(3, this);
    chips_->setAccessibleName(tr("Citations of the latest answer"));
    chips_->content()->setAccessibleName(chips_->accessibleName());
    question_ = new QLineEdit(this);
    question_->setAccessibleName(tr("Question"));
    question_->setPlaceholderText(tr("Ask about your documents (Ctrl+L)"));
    question_->setClearButtonEnabled(true);
    ask_ = button(this, QStringLiteral(":/icons/action-ask.svg"), tr("Ask"), tr("Ask the question (Enter)"));
    stop_ = button(this, QStringLiteral(":/icons/action-cancel.svg"), tr("Stop"), tr("Stop the answer (Esc)"));
    stop_->setShortcut(Qt::Key_Escape);
    stop_->setEnabled(false);
    copy_ = button(this, QStringLiteral(":/icons/action-copy.svg"), tr("Copy"),
                   tr("Copy the latest answer with its citations (Ctrl+Shift+C)"));
    copy_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
    copy_->setEnabled(false);
    clear_ = button(this, QStringLiteral(":/icons/action-remove.svg"), tr("Clear"),
                    tr("Clear the chat history (kept in the library until cleared)"));
    clear_->setObjectName(QStringLiteral("clearChat"));
    clear_->setEnabled(false);

    auto* row = new QHBoxLayout;
    row->addWidget(question_, 1);
    row->addWidget(ask_);
    row->addWidget(stop_);
    row->addWidget(copy_);
    row->addWidget(clear_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* title = new QLabel(tr("<b>Chat</b>"), this);
    title->setContentsMargins(6, 4, 6, 0);
    layout->addWidget(title);
    layout->addWidget(transcript_, 1);
    layout->addWidget(chips_);
    layout->addLayout(row);
    rebuildChips();

    connect(question_, &QLineEdit::returnPressed, this, &ChatPane::send);
    connect(ask_, &QToolButton::clicked, this, &ChatPane::send);
    connect(stop_, &QToolButton::clicked, this, &ChatPane::stop);
    connect(copy_, &QToolButton::clicked, this, [this] { copyAnswer(); });
    connect(clear_, &QToolButton::clicked, this, &ChatPane::clearRequested);
    connect(transcript_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        int a = 0, n = 0;
        if (parse_citation_link(url.toString(), &a, &n)) activateCitation(a, n);
        else if (const int p = parse_plan_link(url.toString()); p >= 0 && p < static_cast<int>(answers_.size()))
            Q_EMIT planRequested(p);
    });
}

ChatPane::~ChatPane() {
    if (cancel_) cancel_->store(true);
    if (idle_stop_) idle_stop_->store(true);
    if (watcher_) watcher_->disconnect(this);
    pool_.waitForDone();
}

void ChatPane::setService(std::shared_ptr<AskService> service, const QString& unavailable) {
    // The old service's idle slices end (the loop holds it, and its session's memory, until then).
    if (idle_stop_) idle_stop_->store(true);
    service_ = std::move(service);
    unavailable_ = unavailable;
}

void ChatPane::send() {
    const QString q = question_->text().trimmed();
    if (q.isEmpty() || busy()) return;
    question_->clear();
    ask(q);
}

void ChatPane::ask(const QString& question) {
    if (busy()) return;
    ChatAnswer a;
    a.answer.question = question.toStdString();
    if (!service_)
        a.error = unavailable_.isEmpty() ? std::string("no model is loaded; choose one in Model → Manage models")
                                         : unavailable_.toStdString();
    else if (library_->readyDocuments().empty())
        a.error = "no document is ready yet; add files to the library first";
    if (!a.error.empty()) {
        a.finished = true;
        answers_.push_back(a);
        render();
        rebuildChips();
        Q_EMIT answerFinished(static_cast<int>(answers_.size()) - 1);
        return;
    }
    a.status = tr("starting\u2026").toStdString();
    answers_.push_back(a);
    if (idle_stop_) idle_stop_->store(true);  // the idle slice in flight ends; the answer runs next
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    watcher_ = new QFutureWatcher<AnswerEvent>(this);
    connect(watcher_, &QFutureWatcherBase::resultsReadyAt, this, &ChatPane::onResults);
    connect(watcher_, &QFutureWatcherBase::finished, this, &ChatPane::onFinished);
    watcher_->setFuture(QtConcurrent::run(&pool_, run_answer, service_, a.answer.question, effort_, cancel_));
    ask_->setEnabled(false);
    stop_->setEnabled(true);
    render();
    rebuildChips();
    Q_EMIT answerStarted();
}

void ChatPane::stop() {
    if (cancel_) cancel_->store(true);
}

void ChatPane::onResults(int begin, int end) {
    if (!watcher_ || answers_.empty()) return;
    ChatAnswer& a = answers_.back();
    for (int i = begin; i < end; ++i) {
        const AnswerEvent ev = watcher_->resultAt(i);
        if (ev.done) {
            a = *ev.done;
        } else if (!ev.status.isEmpty()) {
            a.status = ev.status.toStdString();
        } else {
            a.answer.text += ev.piece.toStdString();
            a.status.clear();  // the text speaks for itself now
        }
    }
    render();
}

void ChatPane::onFinished() {
    QFutureWatcher<AnswerEvent>* w = watcher_;
    watcher_ = nullptr;
    cancel_.reset();
    w->deleteLater();
    if (!answers_.empty()) {
        answers_.back().finished = true;
        answers_.back().status.clear();
    }
    ask_->setEnabled(true);
    stop_->setEnabled(false);
    render();
    rebuildChips();
    startIdle();
    Q_EMIT answerFinished(static_cast<int>(answers_.size()) - 1);
}

void ChatPane::startIdle() {
    if (!service_) return;
    if (idle_stop_) idle_stop_->store(true);
    idle_stop_ = std::make_shared<std::atomic<bool>>(false);
    pool_.start([service = service_, stop = idle_stop_] {
        try {
            while (!stop->load() && service->idle()) {
            }
        } catch (...) {  // idle work is optional: the next answer reports what is wrong
        }
    });
}

void ChatPane::addAnswer(const ChatAnswer& answer) {
    answers_.push_back(answer);
    answers_.back().finished = true;
    answers_.back().status.clear();
    render();
    rebuildChips();
}

void ChatPane::restoreAnswers(std::vector<ChatAnswer> earlier) {
    if (earlier.empty()) return;
    for (auto& a : earlier) {
        a.finished = true;
        a.status.clear();
    }
    answers_.insert(answers_.begin(), std::make_move_iterator(earlier.begin()),
                    std::make_move_iterator(earlier.end()));
    render();
    rebuildChips();
}

bool ChatPane::clearAnswers() {
    if (busy()) return false;
    answers_.clear();
    render();
    rebuildChips();
    return true;
}

void ChatPane::updateButtons() {
    copy_->setEnabled(!answers_.empty() && !answers_.back().answer.text.empty());
    clear_->setEnabled(!answers_.empty() && !busy());
}

void ChatPane::render() {
    const bool dark = dark_palette(this);
    QString html;
    for (size_t i = 0; i < answers_.size(); ++i) html += answer_html(answers_[i], static_cast<int>(i), dark);
    QScrollBar* bar = transcript_->verticalScrollBar();
    const bool at_end = bar->value() >= bar->maximum() - 4;
    transcript_->setHtml(html);
    if (at_end) bar->setValue(bar->maximum());
    updateButtons();
}

void ChatPane::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) render();
}

QWidget* ChatPane::chipBar() const { return chips_->content(); }

void ChatPane::rebuildChips() {
    while (QLayoutItem* item = chips_->flow()->takeAt(0)) {
        delete item->widget();
        delete item;
    }
    chips_->setVisible(false);
    if (answers_.empty()) return;
    const int index = static_cast<int>(answers_.size()) - 1;
    const Answer& a = answers_.back().answer;
    if (a.citations.empty() || !answers_.back().finished) return;
    for (size_t i = 0; i < a.citations.size(); ++i) {
        const Citation& c = a.citations[i];
        const bool weak = a.weak(i);
        const QString note = citation_note(a, i);
        auto* chip = new QToolButton(chips_->content());
        chip->setObjectName(QStringLiteral("citationChip%1").arg(c.number));
        // A long file name is shortened in the middle (the accessible name and tooltip have it all).
        const QString place = chip->fontMetrics().elidedText(citation_place(c), Qt::ElideMiddle,
                                                              chip->fontMetrics().averageCharWidth() * 28);
        chip->setText(QStringLiteral("[%1] %2").arg(c.number).arg(place));
        chip->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
        chip->setAccessibleName(tr("Citation %1: %2%3")
                                    .arg(c.number)
                                    .arg(citation_place(c),
                                         weak ? tr(" (weak)") : !a.used(i) ? tr(" (not cited by a sentence)") : QString()));
        QStringList tip;
        if (weak) tip << tr("Weak: %1").arg(note);
        else if (!note.isEmpty()) tip << note;
        if (const QString e = citation_excerpt(c, 300); !e.isEmpty()) tip << QStringLiteral("\u201c%1\u201d").arg(e);
        for (const QString& s : citation_supports(a, i)) tip << tr("Backs %1").arg(s);
        chip->setToolTip(tip.join(QLatin1Char('\n')));
        if (weak) {
            chip->setIcon(QIcon(QStringLiteral(":/icons/state-weak.svg")));
            chip->setStyleSheet(QStringLiteral("QToolButton { border: 1px dashed #b9770e; border-radius: 9px; padding: 2px 8px; }"));
        } else if (!a.used(i)) {
            chip->setStyleSheet(QStringLiteral("QToolButton { border: 1px dotted palette(mid); border-radius: 9px; padding: 2px 8px; }"));
        } else {
            chip->setStyleSheet(QStringLiteral("QToolButton { border: 1px solid palette(highlight); border-radius: 9px; padding: 2px 8px; }"));
        }
        const int number = c.number;
        connect(chip, &QToolButton::clicked, this, [this, index, number] { activateCitation(index, number); });
        chips_->flow()->addWidget(chip);
    }
    chips_->setVisible(true);
    chips_->updateHeight();
}

void ChatPane::copyAnswer(int index) {
    if (answers_.empty()) return;
    if (index < 0 || index >= static_cast<int>(answers_.size())) index = static_cast<int>(answers_.size()) - 1;
    QApplication::clipboard()->setText(answer_plain_text(answers_[static_cast<size_t>(index)]));
}

void ChatPane::activateCitation(int index, int number) {
    if (index < 0 || index >= static_cast<int>(answers_.size())) return;
    const Answer& a = answers_[static_cast<size_t>(index)].answer;
    const int i = citation_index(a, number);
    if (i >= 0) Q_EMIT citationActivated(a.citations[static_cast<size_t>(i)], index);
}

}  // namespace sl::desktop
