// Helpers for the desktop widget tests: a window on a throw-away settings file, a scripted
// AnswerService, drops of real files, and waiting for library states.
#pragma once

#include <QDropEvent>
#include <QMimeData>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include <memory>
#include <thread>

#include "app/desktop/answer_service.h"
#include "app/desktop/library_model.h"
#include "app/desktop/main_window.h"

namespace sl::test {

// Qt 6.4's GStreamer backend lacks the Debian plugins for AVI; the app picks FFmpeg the same way.
inline void use_ffmpeg_media_backend() {
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND")) qputenv("QT_MEDIA_BACKEND", "ffmpeg");
}

// Settings in `dir` with the budget dialog off (tests drop big files) and OCR as given.
inline std::unique_ptr<desktop::MainWindow> make_window(const QTemporaryDir& dir, bool ocr = false,
                                                        std::shared_ptr<desktop::AnswerService> service = {}) {
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

// Streams a fixed answer in a few pieces; the citations are given by the test.
class ScriptedAnswerService : public desktop::AnswerService {
public:
    explicit ScriptedAnswerService(desktop::Answer answer) : answer_(std::move(answer)) {}
    std::string name() const override { return "scripted"; }
    desktop::Answer answer(const std::string& question, const desktop::DocumentList&, const desktop::AnswerOptions&,
                           const std::function<bool(std::string_view)>& on_text, const std::atomic<bool>*) override {
        desktop::Answer a = answer_;
        a.question = question;
        const std::string& t = a.text;
        for (size_t i = 0; i < t.size(); i += 7) {
            if (on_text && !on_text(std::string_view(t).substr(i, 7))) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a stream, not one piece
        }
        a.finished = true;
        return a;
    }

private:
    desktop::Answer answer_;
};

}  // namespace sl::test
