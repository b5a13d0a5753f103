#include "app/desktop/pdf_render_queue.h"

#include <QFutureWatcher>
#include <QtConcurrent>

#include "ingest/pdf/pdf_render.h"

namespace sl::desktop {

namespace {

struct RenderResult {
    QImage image;
    QString error;
    bool skipped = false;
};

}  // namespace

PdfRenderQueue::PdfRenderQueue(QObject* parent)
    : QObject(parent),
      renderer_(std::make_shared<std::shared_ptr<ingest::PdfPageRenderer>>()),
      generation_(std::make_shared<std::atomic<quint64>>(0)),
      renders_done_(std::make_shared<std::atomic<int>>(0)) {
    pool_.setMaxThreadCount(1);
}

PdfRenderQueue::~PdfRenderQueue() {
    ++*generation_;
    pool_.waitForDone();
}

void PdfRenderQueue::open(const std::string& path) {
    if (path == path_) return;
    path_ = path;
    ++*generation_;
    renderer_ = std::make_shared<std::shared_ptr<ingest::PdfPageRenderer>>();
}

RenderTicket PdfRenderQueue::render(int page, int dpi, Done done) {
    RenderTicket ticket;
    ticket.cancelled_ = std::make_shared<std::atomic<bool>>(false);
    const quint64 generation = generation_->load();
    auto* watcher = new QFutureWatcher<RenderResult>(this);
    connect(watcher, &QFutureWatcherBase::finished, this,
            [this, watcher, ticket, generation, done = std::move(done)] {
                watcher->deleteLater();
                if (ticket.cancelled() || generation != generation_->load()) return;
                const RenderResult r = watcher->future().result();
                if (!r.skipped) done(r.image, r.error);
            });
    // Runs on pool_'s single thread; never touches widgets.
    watcher->setFuture(QtConcurrent::run(
        &pool_,
        [renderer = renderer_, path = path_, page, dpi, ticket, generation, current = generation_,
         count = renders_done_]() -> RenderResult {
            RenderResult r;
            if (ticket.cancelled() || generation != current->load()) {
                r.skipped = true;
                return r;
            }
            try {
                if (!*renderer) *renderer = std::make_shared<ingest::PdfPageRenderer>(path);
                r.image = (*renderer)->render(page, dpi);
                ++*count;
                if (r.image.isNull())
                    r.error = QString::fromStdString(path) +
                              QStringLiteral(": page %1 did not render").arg(page + 1);
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            }
            return r;
        }));
    return ticket;
}

}  // namespace sl::desktop
