#include "app/desktop/pdf_view.h"

#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <cmath>

#include "app/desktop/highlight_canvas.h"
#include "app/desktop/pdf_page_stack.h"

namespace sl::desktop {

namespace {

QToolButton* tool(QWidget* parent, const QString& icon, const QString& text, const QKeySequence& key) {
    auto* b = new QToolButton(parent);
    b->setIcon(QIcon(icon));
    b->setToolTip(key.isEmpty() ? text : text + QStringLiteral(" (") + key.toString(QKeySequence::NativeText) + QLatin1Char(')'));
    b->setAccessibleName(text);
    if (!key.isEmpty()) b->setShortcut(key);
    b->setAutoRaise(true);
    return b;
}

constexpr double kMinZoom = 0.2;

}  // namespace

PdfView::PdfView(QWidget* parent) : QWidget(parent) {
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(4, 2, 4, 2);
    auto* prev = tool(this, QStringLiteral(":/icons/action-prev.svg"), tr("Previous page"), QKeySequence(Qt::Key_PageUp));
    auto* next = tool(this, QStringLiteral(":/icons/action-next.svg"), tr("Next page"), QKeySequence(Qt::Key_PageDown));
    page_box_ = new QSpinBox(this);
    page_box_->setAccessibleName(tr("Page number"));
    page_box_->setMinimum(1);
    page_count_ = new QLabel(this);
    auto* out = tool(this, QStringLiteral(":/icons/action-zoom-out.svg"), tr("Zoom out"), QKeySequence::ZoomOut);
    auto* in = tool(this, QStringLiteral(":/icons/action-zoom-in.svg"), tr("Zoom in"), QKeySequence::ZoomIn);
    auto* fit = new QToolButton(this);
    fit->setText(tr("Fit width"));
    fit->setAccessibleName(tr("Fit page width"));
    fit->setAutoRaise(true);
    zoom_label_ = new QLabel(this);
    contents_ = new QToolButton(this);
    contents_->setText(tr("Contents"));
    contents_->setAccessibleName(tr("Show the outline"));
    contents_->setToolTip(tr("The document's outline (bookmarks)"));
    contents_->setCheckable(true);
    contents_->setAutoRaise(true);
    auto* search = tool(this, QStringLiteral(":/icons/action-search.svg"), tr("Find in document"), QKeySequence::Find);
    bar->addWidget(contents_);
    bar->addWidget(prev);
    bar->addWidget(page_box_);
    bar->addWidget(page_count_);
    bar->addWidget(next);
    bar->addStretch();
    bar->addWidget(out);
    bar->addWidget(zoom_label_);
    bar->addWidget(in);
    bar->addWidget(fit);
    bar->addWidget(search);

    stack_ = new PdfPageStack(&queue_);
    scroll_ = new QScrollArea(this);
    scroll_->setAccessibleName(tr("PDF page view"));
    scroll_->setAlignment(Qt::AlignHCenter | Qt::AlignTop);
    scroll_->setBackgroundRole(QPalette::Dark);
    // Always there, so that fitting the width does not make it appear and the width change.
    scroll_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
    scroll_->setWidget(stack_);
    scroll_->viewport()->installEventFilter(this);
    setFocusProxy(scroll_);  // focusing the view focuses the pages (Page Up / Down, arrows)
    // Any scroll (the user's, a navigation, a layout) brings the pages in view their renders;
    // only the user's scrolling (wheel, keys, the scroll bars) moves the current page.
    connect(scroll_->verticalScrollBar(), &QScrollBar::valueChanged, this, &PdfView::updateWindow);
    connect(scroll_->verticalScrollBar(), &QScrollBar::actionTriggered, this,
            &PdfView::followScroll);
    connect(scroll_->horizontalScrollBar(), &QScrollBar::actionTriggered, this,
            &PdfView::followScroll);
    connect(stack_, &PdfPageStack::pageRendered, this, [this](int page) {
        if (page == page_) Q_EMIT pageShown(page);
    });
    connect(stack_, &PdfPageStack::renderFailed, this, [this](int page, const QString& message) {
        if (page == page_) Q_EMIT renderFailed(message);
    });

    outline_ = new QTreeWidget(this);
    outline_->setAccessibleName(tr("Outline"));
    outline_->setHeaderHidden(true);
    outline_->setColumnCount(2);
    outline_->header()->setStretchLastSection(false);
    outline_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    outline_->header()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
    pages_ = new QListWidget(this);
    pages_->setAccessibleName(tr("Page thumbnails"));
    pages_->setViewMode(QListView::IconMode);
    pages_->setFlow(QListView::TopToBottom);
    pages_->setWrapping(false);
    pages_->setMovement(QListView::Static);
    pages_->setIconSize(QSize(96, 128));
    pages_->setUniformItemSizes(true);
    side_ = new QTabWidget(this);
    side_->setAccessibleName(tr("Contents"));
    side_->addTab(outline_, tr("Outline"));
    side_->addTab(pages_, tr("Pages"));
    side_->hide();
    split_ = new QSplitter(Qt::Horizontal, this);
    split_->addWidget(side_);
    split_->addWidget(scroll_);
    split_->setStretchFactor(1, 1);
    split_->setSizes({220, 600});

    // The find bar, under the page (hidden until Ctrl+F).
    find_bar_ = new QWidget(this);
    auto* fb = new QHBoxLayout(find_bar_);
    fb->setContentsMargins(4, 2, 4, 2);
    find_ = new QLineEdit(find_bar_);
    find_->setAccessibleName(tr("Find text"));
    find_->setPlaceholderText(tr("Find in the document"));
    find_->setClearButtonEnabled(true);
    hits_label_ = new QLabel(find_bar_);
    auto* up = tool(find_bar_, QStringLiteral(":/icons/action-prev.svg"), tr("Previous match"), QKeySequence(Qt::SHIFT | Qt::Key_F3));
    auto* down = tool(find_bar_, QStringLiteral(":/icons/action-next.svg"), tr("Next match"), QKeySequence(Qt::Key_F3));
    auto* close = new QToolButton(find_bar_);
    close->setText(tr("Close"));
    close->setAccessibleName(tr("Close the find bar"));
    close->setAutoRaise(true);
    fb->addWidget(find_, 1);
    fb->addWidget(hits_label_);
    fb->addWidget(up);
    fb->addWidget(down);
    fb->addWidget(close);
    find_bar_->hide();
    find_timer_ = new QTimer(this);
    find_timer_->setSingleShot(true);
    find_timer_->setInterval(250);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addLayout(bar);
    layout->addWidget(split_, 1);
    layout->addWidget(find_bar_);

    connect(search, &QToolButton::clicked, this, [this] { find(); });
    connect(up, &QToolButton::clicked, this, &PdfView::findPrevious);
    connect(down, &QToolButton::clicked, this, &PdfView::findNext);
    connect(close, &QToolButton::clicked, this, [this] {
        find_bar_->hide();
        hits_.clear();
        hit_ = -1;
    });
    connect(find_, &QLineEdit::textEdited, this, [this] { find_timer_->start(); });
    connect(find_timer_, &QTimer::timeout, this, &PdfView::runSearch);
    connect(find_, &QLineEdit::returnPressed, this, [this] {
        if (find_timer_->isActive()) {
            find_timer_->stop();
            runSearch();
        } else if (QGuiApplication::keyboardModifiers() & Qt::ShiftModifier) {
            findPrevious();
        } else {
            findNext();
        }
    });
    auto* esc = new QShortcut(QKeySequence(Qt::Key_Escape), find_, nullptr, nullptr, Qt::WidgetShortcut);
    connect(esc, &QShortcut::activated, close, &QToolButton::click);
    connect(contents_, &QToolButton::toggled, this, [this](bool on) {
        if (on) {
            fillOutline();
            fillPages();
            if (page_ >= 0 && page_ < pages_->count()) {
                const QSignalBlocker block(pages_);
                pages_->setCurrentRow(page_);
                pages_->scrollToItem(pages_->item(page_));
            }
        }
        side_->setVisible(on);
        if (on) QTimer::singleShot(0, this, &PdfView::renderVisibleThumbnails);
    });
    connect(side_, &QTabWidget::currentChanged, this, [this] { QTimer::singleShot(0, this, &PdfView::renderVisibleThumbnails); });
    connect(pages_->verticalScrollBar(), &QScrollBar::valueChanged, this, &PdfView::renderVisibleThumbnails);
    connect(pages_, &QListWidget::itemClicked, this, [this](QListWidgetItem* item) {
        if (document_) showPage(document_, pages_->row(item), std::nullopt);
    });
    connect(outline_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item, int) {
        const int unit = item->data(0, Qt::UserRole).toInt();
        if (document_ && unit >= 0) showPage(document_, unit, std::nullopt);
    });
    connect(outline_, &QTreeWidget::itemClicked, outline_, &QTreeWidget::itemActivated);

    connect(prev, &QToolButton::clicked, this, &PdfView::previousPage);
    connect(next, &QToolButton::clicked, this, &PdfView::nextPage);
    connect(in, &QToolButton::clicked, this, &PdfView::zoomIn);
    connect(out, &QToolButton::clicked, this, &PdfView::zoomOut);
    connect(fit, &QToolButton::clicked, this, &PdfView::fitWidth);
    connect(page_box_, &QSpinBox::editingFinished, this, [this] {
        if (document_ && page_box_->value() - 1 != page_) showPage(document_, page_box_->value() - 1, std::nullopt);
    });
}

PdfView::~PdfView() = default;

std::optional<doc::BBox> PdfView::highlight() const { return box_; }

bool PdfView::rendered() const {
    return document_ && page_ >= 0 && stack_->rendered(page_);
}

HighlightCanvas* PdfView::canvas() const {
    return page_ >= 0 ? stack_->canvas(page_) : nullptr;
}

int PdfView::heldImages() const {
    return stack_->heldImages();
}

void PdfView::showPage(std::shared_ptr<const doc::Document> document, int page, std::optional<doc::BBox> box) {
    if (!document) return;
    // The same file again (a citation in the open document, perhaps read anew) keeps its layout
    // and renders.
    const bool opened = !document_ || document_->path != document->path ||
                        document_->units.size() != document->units.size();
    document_ = std::move(document);
    if (opened) {
        queue_.open(document_->path);
        stack_->setDocument(*document_);
        page_box_->blockSignals(true);
        page_box_->setMaximum(std::max<int>(1, static_cast<int>(document_->units.size())));
        page_box_->blockSignals(false);
    }
    const int n = static_cast<int>(document_->units.size());
    if (opened) layoutPages();
    if (n == 0) {
        page_ = -1;
        box_.reset();
        return;
    }
    page_ = std::clamp(page, 0, n - 1);
    box_ = box;
    stack_->setHighlight(page_, box_);
    if (side_->isVisible()) {  // another document: its outline and pages
        fillOutline();
        fillPages();
    }
    if (!box_) {
        // The page's top, with half the gap above it in view.
        anchor_ = Anchor{page_, {0.5, 0.0}, {0.5, 0.0}, {0.0, PdfPageStack::kGap / 2.0}};
    } else if (opened || !highlightInView()) {
        // The highlight's centre a third down the viewport.
        anchor_ = Anchor{page_,
                         {(box_->x0 + box_->x1) / 2.0, (box_->y0 + box_->y1) / 2.0},
                         {0.5, 1.0 / 3.0},
                         {}};
    } else {
        anchor_ = anchorAt(page_, {0.5, 0.0}, {0.0, 0.0});  // in view already: the view stays
    }
    applyAnchor();
    updateWindow();
    setCurrentPage(page_);
}

// The current page is `page` now: the page box, its label, the thumbnails and the caption follow.
void PdfView::setCurrentPage(int page) {
    page_ = page;
    if (!document_ || page_ < 0 || page_ >= static_cast<int>(document_->units.size())) return;
    const int n = static_cast<int>(document_->units.size());
    if (side_->isVisible() && page_ < pages_->count()) {
        const QSignalBlocker block(pages_);
        pages_->setCurrentRow(page_);
        pages_->scrollToItem(pages_->item(page_));
    }
    page_box_->blockSignals(true);
    page_box_->setValue(page_ + 1);
    page_box_->blockSignals(false);
    // The physical page number in the box; the printed label ("p. 66") beside it when it differs.
    const std::string& label = document_->units[static_cast<size_t>(page_)].label;
    page_count_->setText(!label.empty() && label != std::to_string(page_ + 1)
                             ? tr("of %1 (p. %2)").arg(n).arg(QString::fromStdString(label))
                             : tr("of %1").arg(n));
    Q_EMIT pageChanged(page_);
    if (stack_->rendered(page_)) Q_EMIT pageShown(page_);
}

// The anchor of page `page` at the viewport point view_frac * size + view_px, as scrolled now.
PdfView::Anchor PdfView::anchorAt(int page, QPointF view_frac, QPointF view_px) const {
    Anchor a;
    a.page = page;
    a.view_frac = view_frac;
    a.view_px = view_px;
    const QRect r = stack_->pageRect(page);
    if (r.isEmpty()) return a;
    const QSize v = scroll_->viewport()->size();
    const QPointF at(
        view_frac.x() * v.width() + view_px.x() + scroll_->horizontalScrollBar()->value(),
        view_frac.y() * v.height() + view_px.y() + scroll_->verticalScrollBar()->value());
    a.on_page = {(at.x() - r.x()) / r.width(), (at.y() - r.y()) / r.height()};
    return a;
}

void PdfView::applyAnchor() {
    const QRect r = stack_->pageRect(anchor_.page);
    if (r.isEmpty()) return;
    const QSize v = scroll_->viewport()->size();
    const QPointF on_stack(r.x() + anchor_.on_page.x() * r.width(),
                           r.y() + anchor_.on_page.y() * r.height());
    const QPointF in_view(anchor_.view_frac.x() * v.width() + anchor_.view_px.x(),
                          anchor_.view_frac.y() * v.height() + anchor_.view_px.y());
    // The stack is never narrower than the viewport and starts at its top: scroll values are
    // stack coordinates of the viewport's top left.
    scroll_->horizontalScrollBar()->setValue(
        static_cast<int>(std::lround(on_stack.x() - in_view.x())));
    scroll_->verticalScrollBar()->setValue(
        static_cast<int>(std::lround(on_stack.y() - in_view.y())));
}

bool PdfView::highlightInView() const {
    const QRect h = stack_->highlightRect();
    if (h.isEmpty()) return false;
    const QRect view(
        QPoint(scroll_->horizontalScrollBar()->value(), scroll_->verticalScrollBar()->value()),
        scroll_->viewport()->size());
    return view.contains(h);
}

// The pages near the viewport get (or keep) their renders; the others let theirs go.
void PdfView::updateWindow() {
    if (!document_ || page_ < 0) return;
    const int top = scroll_->verticalScrollBar()->value();
    stack_->setWindow(top, top + scroll_->viewport()->height(), page_);
}

// The user scrolled: the current page is the one covering most of the viewport, and the reading
// position is where the viewport's top now meets it. The slider's position is already the new
// one (the value follows right after this signal).
void PdfView::followScroll() {
    if (!document_ || stack_->pageCount() == 0) return;
    const int top = scroll_->verticalScrollBar()->sliderPosition();
    const int page = stack_->mostVisiblePage(top, scroll_->viewport()->height());
    if (page < 0) return;
    const QRect r = stack_->pageRect(page);
    const double x =
        scroll_->horizontalScrollBar()->sliderPosition() + scroll_->viewport()->width() / 2.0;
    anchor_ =
        Anchor{page, {(x - r.x()) / r.width(), double(top - r.y()) / r.height()}, {0.5, 0.0}, {}};
    if (page != page_) setCurrentPage(page);
}

// Lays the pages out at the zoom (recomputed when fitting the width).
void PdfView::layoutPages() {
    const int vw = scroll_->viewport()->width();
    if (fit_width_) zoom_ = (vw - 2 * PdfPageStack::kMargin) / stack_->widestPagePoints();
    zoom_ = std::min(std::max(zoom_, kMinZoom), stack_->maxZoom());
    zoom_label_->setText(QStringLiteral("%1%").arg(static_cast<int>(std::lround(zoom_ * 100))));
    stack_->setZoom(zoom_, vw);
}

// Lays the pages out and restores the reading position.
void PdfView::relayout() {
    layoutPages();
    if (!document_ || page_ < 0) return;
    applyAnchor();
    updateWindow();
}

void PdfView::fillOutline() {
    if (!document_ || outline_for_ == document_->path) return;
    outline_for_ = document_->path;
    outline_->clear();
    std::vector<QTreeWidgetItem*> parents;  // by level
    for (const auto& e : document_->outline) {
        const int level = std::max(0, e.level);
        parents.resize(static_cast<size_t>(std::min<int>(level, static_cast<int>(parents.size()))));
        auto* item = parents.empty() ? new QTreeWidgetItem(outline_) : new QTreeWidgetItem(parents.back());
        item->setText(0, QString::fromStdString(e.title));
        item->setToolTip(0, QString::fromStdString(e.title));
        if (e.unit >= 0 && e.unit < static_cast<int>(document_->units.size())) {
            const std::string& label = document_->units[static_cast<size_t>(e.unit)].label;
            item->setText(1, QString::fromStdString(label.empty() ? std::to_string(e.unit + 1) : label));
        }
        item->setData(0, Qt::UserRole, e.unit);
        parents.push_back(item);
    }
    if (document_->outline.empty()) {
        auto* none = new QTreeWidgetItem(outline_);
        none->setText(0, tr("This document has no outline."));
        none->setData(0, Qt::UserRole, -1);
        none->setFlags(Qt::NoItemFlags);
    }
    outline_->expandToDepth(0);
}

void PdfView::fillPages() {
    if (!document_ || pages_for_ == document_->path) return;
    pages_for_ = document_->path;
    pages_->clear();
    thumb_asked_.assign(document_->units.size(), false);
    QPixmap blank(72, 96);
    blank.fill(Qt::white);
    for (const auto& u : document_->units)
        new QListWidgetItem(QIcon(blank), QString::fromStdString(u.label.empty() ? std::to_string(u.index + 1) : u.label), pages_);
    QTimer::singleShot(0, this, &PdfView::renderVisibleThumbnails);
}

// Thumbnails of the pages in view (and a few beyond), each rendered once, on the render thread.
void PdfView::renderVisibleThumbnails() {
    if (!document_ || !side_->isVisible() || side_->currentWidget() != pages_ || pages_->count() == 0) return;
    QListWidgetItem* top = pages_->itemAt(4, 4);
    int first = top ? pages_->row(top) : 0;
    QListWidgetItem* bottom = pages_->itemAt(4, pages_->viewport()->height() - 4);
    int last = bottom ? pages_->row(bottom) : std::min(pages_->count() - 1, first + 8);
    first = std::max(0, first - 2);
    last = std::min(pages_->count() - 1, last + 4);
    const std::string path = document_->path;
    for (int p = first; p <= last; ++p) {
        if (thumb_asked_[static_cast<size_t>(p)]) continue;
        thumb_asked_[static_cast<size_t>(p)] = true;
        const doc::Unit& u = document_->units[static_cast<size_t>(p)];
        const double width_pt = u.width > 0 ? u.width : 612.0;
        const int dpi = std::max(6, static_cast<int>(96.0 * 72.0 / width_pt));  // ~96 px wide
        // On the GUI thread, after the worker rendered it (after the page renders asked before).
        queue_.render(p, dpi, [this, p, path](const QImage& img, const QString&) {
            if (img.isNull() || pages_for_ != path || p >= pages_->count()) return;
            pages_->item(p)->setIcon(QIcon(QPixmap::fromImage(img)));
        });
    }
}

void PdfView::find(const QString& text) {
    find_bar_->show();
    if (!text.isEmpty()) find_->setText(text);
    find_->setFocus();
    find_->selectAll();
    runSearch();
}

void PdfView::runSearch() {
    hits_.clear();
    hit_ = -1;
    if (!document_ || find_->text().trimmed().isEmpty()) {
        hits_label_->clear();
        return;
    }
    hits_ = find_in_document(*document_, find_->text());
    if (hits_.empty()) {
        hits_label_->setText(tr("no match"));
        return;
    }
    // The first hit at or after the current page.
    int first = 0;
    for (int i = 0; i < static_cast<int>(hits_.size()); ++i)
        if (hits_[static_cast<size_t>(i)].unit >= page_) {
            first = i;
            break;
        }
    goToHit(first);
}

void PdfView::goToHit(int i) {
    if (hits_.empty() || !document_) return;
    const int n = static_cast<int>(hits_.size());
    hit_ = ((i % n) + n) % n;
    const SearchHit& h = hits_[static_cast<size_t>(hit_)];
    hits_label_->setText(tr("%1 of %2").arg(hit_ + 1).arg(n) + (n >= 5000 ? QStringLiteral("+") : QString()));
    hits_label_->setToolTip(h.line);
    showPage(document_, h.unit, h.box);
}

void PdfView::findNext() {
    if (hits_.empty()) runSearch();
    else goToHit(hit_ + 1);
}

void PdfView::findPrevious() {
    if (hits_.empty()) runSearch();
    else goToHit(hit_ - 1);
}

bool PdfView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == scroll_->viewport()) {
        if (event->type() == QEvent::Wheel) {
            auto* w = static_cast<QWheelEvent*>(event);
            if (w->modifiers() & Qt::ControlModifier) {
                const int dy = w->angleDelta().y();
                if (dy != 0) zoomAt(dy > 0 ? 1.25 : 1 / 1.25, w->position().toPoint());
                return true;
            }
        } else if (event->type() == QEvent::Resize) {
            relayout();
        }
    }
    return QWidget::eventFilter(watched, event);
}

void PdfView::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    relayout();  // the sizes are known now: the reading position laid out while hidden comes back
}

// The page point under the pointer stays under it.
void PdfView::zoomAt(double factor, const QPoint& viewport_pos) {
    if (!document_ || page_ < 0) return;
    const int y = scroll_->verticalScrollBar()->value() + viewport_pos.y();
    const int page = std::max(0, stack_->pageAt(y));
    anchor_ = anchorAt(page, {0.0, 0.0}, QPointF(viewport_pos));
    fit_width_ = false;
    zoom_ *= factor;
    relayout();
    // Zoomed around a point of another page, the current one may have left the view.
    const int top = scroll_->verticalScrollBar()->value();
    const QRect r = stack_->pageRect(page_);
    if (r.bottom() < top || r.top() >= top + scroll_->viewport()->height()) {
        const int now = stack_->mostVisiblePage(top, scroll_->viewport()->height());
        if (now >= 0) setCurrentPage(now);
    }
}

void PdfView::zoomIn() {
    fit_width_ = false;
    zoom_ = std::min(zoom_ * 1.25, 8.0);
    relayout();
}

void PdfView::zoomOut() {
    fit_width_ = false;
    zoom_ = std::max(zoom_ / 1.25, kMinZoom);
    relayout();
}

void PdfView::fitWidth() {
    fit_width_ = true;
    relayout();
}

void PdfView::nextPage() {
    if (document_ && page_ + 1 < static_cast<int>(document_->units.size())) showPage(document_, page_ + 1, std::nullopt);
}

void PdfView::previousPage() {
    if (document_ && page_ > 0) showPage(document_, page_ - 1, std::nullopt);
}

}  // namespace sl::desktop
