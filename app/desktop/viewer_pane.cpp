#include "app/desktop/viewer_pane.h"

#include <QLabel>
#include <QStackedWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "app/desktop/pdf_view.h"
#include "app/desktop/slide_view.h"
#include "core/document/locator.h"

namespace sl::desktop {

ViewerPane::ViewerPane(QWidget* parent) : QWidget(parent) {
    setAccessibleName(tr("Viewer"));
    caption_ = new QLabel(this);
    caption_->setAccessibleName(tr("Shown place"));
    caption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont f = caption_->font();
    f.setBold(true);
    caption_->setFont(f);
    caption_->setContentsMargins(6, 4, 6, 4);
    stack_ = new QStackedWidget(this);
    empty_ = new QLabel(tr("Open a document from the library, or click a citation in an answer."), this);
    empty_->setAlignment(Qt::AlignCenter);
    empty_->setWordWrap(true);
    pdf_ = new PdfView(this);
    slides_ = new SlideView(this);
    video_ = new VideoView(this);
    image_ = new ImageView(this);
    text_ = new QTextBrowser(this);
    text_->setAccessibleName(tr("Section text"));
    text_->setOpenLinks(false);
    stack_->addWidget(empty_);
    stack_->addWidget(pdf_);
    stack_->addWidget(slides_);
    stack_->addWidget(video_);
    stack_->addWidget(image_);
    stack_->addWidget(text_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(caption_);
    layout->addWidget(stack_, 1);
    clear();
    // The caption follows navigation within the document: pages, slides, seeks and playback.
    connect(pdf_, &PdfView::pageChanged, this, [this](int page) {
        if (mode_ == Mode::Pdf) captionUnit(page);
    });
    connect(slides_, &SlideView::slideChanged, this, [this](int slide) {
        if (mode_ == Mode::Slides) captionUnit(slide);
    });
    connect(video_, &VideoView::timeShown, this, [this](double seconds) {
        if (mode_ == Mode::Video && document_)
            setCaption(QString::fromStdString(doc::file_name(*document_) + " " + doc::format_time(seconds)));
    });
}

void ViewerPane::captionUnit(int unit) {
    if (!document_ || unit < 0 || unit >= static_cast<int>(document_->units.size())) return;
    setCaption(QString::fromStdString(doc::full_locator(*document_, document_->units[static_cast<size_t>(unit)])));
}

void ViewerPane::setCaption(const QString& text) {
    if (caption_->text() != text) caption_->setText(text);
}

void ViewerPane::showSection(int unit) {
    text_->clear();
    if (!document_ || unit < 0 || unit >= static_cast<int>(document_->units.size())) return;
    QString html;
    for (const doc::Block& b : document_->units[static_cast<size_t>(unit)].blocks) {
        const QString t = QString::fromStdString(b.text).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"));
        switch (b.role) {
            case doc::BlockRole::Title: html += QStringLiteral("<h3>%1</h3>").arg(t); break;
            case doc::BlockRole::TableCell:
                html += QStringLiteral("<p style=\"margin-left:12px; color:#444\">▦ %1</p>").arg(t);
                break;
            case doc::BlockRole::Note:
                html += QStringLiteral("<p style=\"font-size:small; color:#555\">%1</p>").arg(t);
                break;
            default: html += QStringLiteral("<p>%1</p>").arg(t); break;
        }
    }
    text_->setHtml(html);
}

QString ViewerPane::caption() const { return caption_->text(); }

void ViewerPane::clear() {
    mode_ = Mode::Empty;
    document_.reset();
    caption_->setText(tr("Viewer"));
    stack_->setCurrentWidget(empty_);
}

void ViewerPane::open(std::shared_ptr<const doc::Document> document, const doc::SourceRef& ref,
                      std::vector<TimelineMarker> markers) {
    if (!document) return;
    document_ = document;
    const int unit = std::clamp(ref.unit, 0, std::max(0, static_cast<int>(document->units.size()) - 1));
    QString where = QString::fromStdString(doc::file_name(*document));
    if (!document->units.empty())
        where = QString::fromStdString(doc::full_locator(*document, document->units[static_cast<size_t>(unit)]));
    switch (document->kind) {
        case doc::DocumentKind::Pdf:
            mode_ = Mode::Pdf;
            stack_->setCurrentWidget(pdf_);
            pdf_->showPage(document, unit, ref.bbox);
            break;
        case doc::DocumentKind::Slides:
            mode_ = Mode::Slides;
            stack_->setCurrentWidget(slides_);
            slides_->showSlide(document, unit, ref.bbox);
            break;
        case doc::DocumentKind::Video:
        case doc::DocumentKind::Audio: {
            mode_ = Mode::Video;
            stack_->setCurrentWidget(video_);
            double t = 0;
            if (ref.time) t = ref.time->t0;
            else if (!document->units.empty() && document->units[static_cast<size_t>(unit)].time)
                t = document->units[static_cast<size_t>(unit)].time->t0;
            where = QString::fromStdString(doc::file_name(*document) + " " + doc::format_time(t));
            video_->showAt(document, t, std::move(markers));
            break;
        }
        case doc::DocumentKind::Image:
            mode_ = Mode::Image;
            stack_->setCurrentWidget(image_);
            image_->showImage(document, ref.bbox);
            break;
        case doc::DocumentKind::Text:
            mode_ = Mode::Text;
            stack_->setCurrentWidget(text_);
            showSection(unit);
            break;
    }
    setCaption(where);
    Q_EMIT opened(where);
}

}  // namespace sl::desktop
