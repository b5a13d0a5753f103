#include "app/desktop/chip_area.h"

#include <QScrollBar>

#include <algorithm>

#include "app/desktop/flow_layout.h"

namespace sl::desktop {

ChipArea::ChipArea(int max_rows, QWidget* parent) : QScrollArea(parent), max_rows_(std::max(1, max_rows)) {
    setFrameShape(QFrame::NoFrame);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    setWidgetResizable(true);
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    content_ = new QWidget(this);
    flow_ = new FlowLayout(content_);
    flow_->setContentsMargins(4, 2, 4, 2);
    setWidget(content_);
}

int ChipArea::wantedHeight(int width) const {
    if (flow_->count() == 0) return 0;
    // The full height of the wrapped chips, at most max_rows_ rows (then the strip scrolls).
    const int all = flow_->heightForWidth(std::max(1, width));
    int row = 0;
    for (int i = 0; i < flow_->count(); ++i) row = std::max(row, flow_->itemAt(i)->sizeHint().height());
    const QMargins m = flow_->contentsMargins();
    const int cap = max_rows_ * (row + flow_->spacing()) + m.top() + m.bottom();
    return std::min(all, cap) + 2 * frameWidth();
}

void ChipArea::updateHeight() {
    const int width = viewport()->width() > 1 ? viewport()->width() : this->width();
    setFixedHeight(wantedHeight(width));
}

QSize ChipArea::sizeHint() const {
    return {flow_->minimumSize().width(), wantedHeight(std::max(width(), flow_->minimumSize().width()))};
}

QSize ChipArea::minimumSizeHint() const {
    // Narrow as the widest chip; the height follows the width (updateHeight).
    return {std::min(flow_->minimumSize().width(), 240), minimumHeight()};
}

void ChipArea::resizeEvent(QResizeEvent* event) {
    QScrollArea::resizeEvent(event);
    const int h = wantedHeight(viewport()->width());
    if (h != height()) setFixedHeight(h);
}

}  // namespace sl::desktop
