// Helpers for the desktop widget tests: a window on a throw-away settings file, a scripted
// AskService and the core answers it returns (sentences backed by citations of real document
// blocks), drops of real files, and waiting for library states.
#pragma once

#include <QDropEvent>
#include <QMimeData>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include <memory>
#include <string_view>
#include <thread>

#include "app/desktop/ask_service.h"
#include "tests/common/scripted_idle.h"
#include "app/desktop/library_model.h"
#include "app/desktop/main_window.h"
#include "core/document/locator.h"

namespace sl::test {

// Qt 6.4's GStreamer backend lacks the Debian plugins for AVI; the app picks FFmpeg the same way.
inline void use_ffmpeg_media_backend() {
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND")) qputenv("QT_MEDIA_BACKEND", "ffmpeg");
}

// Settings in `dir` with the budget dialog off (tests drop big files) and OCR as given.
inline std::unique_ptr<desktop::MainWindow> make_window(const QTemporaryDir& dir, bool ocr = false,
                                                        std::shared_ptr<desktop::AskService> service = {}) {
    const QString ini = dir.filePath(QStringLiteral("sightline.conf"));
    {
        desktop::AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(ocr);
        s.sync();
    }
    desktop::MainWindowOptions o;
    o.settings_file = ini;
    o.service = std::move(service);
    return std::make_unique<desktop::MainWindow>(o);
}

// A window on a library store in dir/library (the background prefill off: its own tests),
// answering through `service` (null: the app's own, on the settings' model `model`).
inline std::unique_ptr<desktop::MainWindow> make_library_window(const QTemporaryDir& dir,
                                                                std::shared_ptr<desktop::AskService> service = {},
                                                                const QString& model = {}) {
    const QString ini = dir.filePath(QStringLiteral("sightline.conf"));
    {
        desktop::AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(false);
        if (!model.isEmpty()) s.setModelPath(model);
        s.sync();
    }
    desktop::MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir.filePath(QStringLiteral("library"));
    o.service = std::move(service);
    o.background_prefill = false;
    return std::make_unique<desktop::MainWindow>(o);
}

// Sends a real drag-enter + drop of `paths` to the window's central widget.
inline bool drop_files(QWidget* window, const QStringList& paths) {
    auto* mime = new QMimeData;
    QList<QUrl> urls;
    for (const auto& p : paths) urls << QUrl::fromLocalFile(p);
    mime->setUrls(urls);
    QWidget* target = window;
    const QPoint pos = target->rect().center();
    QDragEnterEvent enter(pos, Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &enter);
    if (!enter.isAccepted()) {
        delete mime;
        return false;
    }
    QDropEvent drop(QPointF(pos), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &drop);
    delete mime;
    return drop.isAccepted();
}

inline desktop::ItemState state_of(const desktop::LibraryModel* m, const QString& path) {
    for (const auto& it : m->items())
        if (it.path == path) return it.state;
    return desktop::ItemState::Cancelled;
}

inline const desktop::LibraryItem* item_of(const desktop::LibraryModel* m, const QString& path) {
    for (const auto& it : m->items())
        if (it.path == path) return &it;
    return nullptr;
}

inline std::shared_ptr<const doc::Document> document_of(const desktop::LibraryModel* m, const QString& path) {
    const desktop::LibraryItem* it = item_of(m, path);
    return it ? it->document : nullptr;
}

inline double progress_of(const desktop::LibraryModel* m, const QString& path) {
    const desktop::LibraryItem* it = item_of(m, path);
    return it ? it->progress : -1.0;
}

// A citation of the first block of `d` (from unit `min_unit` on) whose text contains `words` and
// that has a region: its unit, box, locator, and the block's text as snippet. number 0: none found.
inline Citation block_citation(const doc::Document& d, std::string_view words, int number, int min_unit = 0) {
    Citation c;
    for (const auto& u : d.units) {
        if (u.index < min_unit) continue;
        for (const auto& b : u.blocks) {
            if (b.text.find(words) == std::string::npos || !b.bbox || !b.bbox->valid()) continue;
            c.number = number;
            c.unit = u.index;
            c.path = d.path;
            c.kind = d.kind;
            c.locator = doc::full_locator(d, u);
            c.ref = doc::SourceRef{d.id, u.index, b.bbox, b.time ? b.time : u.time};
            c.snippet = b.text;
            for (const auto& other : u.blocks) c.text += other.text + "\n";
            return c;
        }
    }
    return c;
}

// Appends `sentence` (and a space) to a.text as one sentence backed by `supports`.
inline void add_sentence(Answer& a, const std::string& sentence, std::vector<Support> supports = {}) {
    if (!a.text.empty()) a.text += ' ';
    AnswerSentence s;
    s.begin = a.text.size();
    a.text += sentence;
    s.end = a.text.size();
    s.supports = std::move(supports);
    a.sentences.push_back(std::move(s));
}

// A verified support of citation index `citation`.
inline Support support(int citation, double lexical, bool weak = false, std::optional<double> semantic = {}) {
    Support s;
    s.citation = citation;
    s.lexical = lexical;
    s.semantic = semantic;
    s.verified = true;
    s.weak = weak;
    return s;
}

// Streams a fixed answer's text in a few pieces, then returns the answer (sentences, citations).
class ScriptedAnswerService : public desktop::AskService {
public:
    explicit ScriptedAnswerService(desktop::ChatAnswer answer) : answer_(std::move(answer)) {}
    std::string name() const override { return "scripted"; }
    desktop::ChatAnswer answer(const std::string& question, Effort effort, const desktop::AskStream& stream,
                               const std::atomic<bool>* cancel) override {
        last_effort = effort;
        desktop::ChatAnswer a = answer_;
        a.answer.question = question;
        if (stream.on_status) stream.on_status("scripted: reading");
        const std::string& t = a.answer.text;
        for (size_t i = 0; i < t.size(); i += 7) {
            if (cancel && cancel->load()) break;
            if (stream.on_text) stream.on_text(std::string_view(t).substr(i, 7));
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a stream, not one piece
        }
        a.finished = true;
        return a;
    }
    std::atomic<Effort> last_effort{Effort::Medium};
    bool idle() override { return idle_script.step(); }  // idle slices between answers, as scripted
    ScriptedIdle idle_script;

private:
    desktop::ChatAnswer answer_;
};

}  // namespace sl::test
