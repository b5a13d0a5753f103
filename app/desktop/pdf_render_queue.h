// Page renders of one PDF, off the GUI thread. ingest's PdfPageRenderer is not thread-safe, so a
// pool of one thread owns it (opened there on the first render) and serialises every render of
// the PDF view: its pages and its thumbnails. A render runs on that worker and never touches a
// widget; its result is handed to a callback on the GUI thread. A render that is no longer wanted
// (its ticket cancelled, or the queue reopened on another file) is skipped when its turn comes,
// so scrolling fast past many pages costs nothing for the pages passed by.
#pragma once

#include <QImage>
#include <QObject>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace sl::ingest {
class PdfPageRenderer;
}

namespace sl::desktop {

// The handle of one queued render. Copies share the state; cancel() on the GUI thread means the
// callback will not run (and the render is skipped if it has not started). Thread-safe.
class RenderTicket {
public:
    RenderTicket() = default;
    void cancel() const {
        if (cancelled_) cancelled_->store(true);
    }
    bool cancelled() const { return !cancelled_ || cancelled_->load(); }

private:
    friend class PdfRenderQueue;
    std::shared_ptr<std::atomic<bool>> cancelled_;
};

class PdfRenderQueue : public QObject {
    Q_OBJECT

public:
    explicit PdfRenderQueue(QObject* parent = nullptr);
    // Skips what is still queued and waits for the render in progress; no callback runs after.
    ~PdfRenderQueue() override;

    // Later renders read `path`; those queued for the previous file are dropped. GUI thread.
    void open(const std::string& path);
    const std::string& path() const { return path_; }

    // Renders `page` (0-based) at `dpi` on the worker. `done(image, error)` then runs on the GUI
    // thread, unless the ticket was cancelled or the queue reopened meanwhile: a null image with
    // an error naming the file and page when the render failed. GUI thread.
    using Done = std::function<void(const QImage& image, const QString& error)>;
    RenderTicket render(int page, int dpi, Done done);

    // Renders the worker actually performed (skipped ones not counted), for tests and logs.
    int rendersDone() const { return renders_done_->load(); }

private:
    std::string path_;
    // The open document; the holder is replaced on the GUI thread by open(), its content is
    // created and used only on pool_'s thread.
    std::shared_ptr<std::shared_ptr<ingest::PdfPageRenderer>> renderer_;
    std::shared_ptr<std::atomic<quint64>> generation_;  // bumped by open() and the destructor
    std::shared_ptr<std::atomic<int>> renders_done_;
    QThreadPool pool_;  // one thread: the only user of *renderer_
};

}  // namespace sl::desktop
