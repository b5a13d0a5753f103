// The viewer pane: shows a place in a document — a PDF page with the cited region highlighted,
// a slide with its notes, a video at the cited second with markers for every citation into it,
// an image, or the cited section of a text document (DOCX, text, Markdown, HTML, EPUB) —
// whatever the document's kind. GUI thread only.
#pragma once

#include <QWidget>

#include <memory>
#include <vector>

#include "app/desktop/video_view.h"
#include "core/document/document.h"

class QLabel;
class QStackedWidget;
class QTextBrowser;

namespace sl::desktop {

class PdfView;
class SlideView;
class ImageView;

class ViewerPane : public QWidget {
    Q_OBJECT

public:
    enum class Mode { Empty, Pdf, Slides, Video, Image, Text };

    explicit ViewerPane(QWidget* parent = nullptr);

    // Shows `ref` (unit + region or time) of `document`. `markers`: the citations into this
    // document, drawn on a video's timeline.
    void open(std::shared_ptr<const doc::Document> document, const doc::SourceRef& ref,
              std::vector<TimelineMarker> markers = {});
    void clear();

    Mode mode() const { return mode_; }
    const std::shared_ptr<const doc::Document>& document() const { return document_; }
    QString caption() const;

    PdfView* pdfView() const { return pdf_; }
    SlideView* slideView() const { return slides_; }
    VideoView* videoView() const { return video_; }
    ImageView* imageView() const { return image_; }
    QTextBrowser* textView() const { return text_; }

Q_SIGNALS:
    void opened(const QString& locator);

private:
    // The caption for unit `unit` of the open document ("R-intro.pdf p. 12", "deck.pptx slide 4").
    void captionUnit(int unit);
    void setCaption(const QString& text);
    // Fills the text view with section `unit` of the open document (titles as headings, table
    // cells and notes set apart).
    void showSection(int unit);

    Mode mode_ = Mode::Empty;
    std::shared_ptr<const doc::Document> document_;
    QLabel* caption_;
    QStackedWidget* stack_;
    QLabel* empty_;
    PdfView* pdf_;
    SlideView* slides_;
    VideoView* video_;
    ImageView* image_;
    QTextBrowser* text_;
};

}  // namespace sl::desktop
