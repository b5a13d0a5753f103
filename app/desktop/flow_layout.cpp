#include "app/desktop/flow_layout.h"

#include <QWidget>

#include <algorithm>

namespace sl::desktop {

FlowLayout::FlowLayout(QWidget* parent, int spacing) : QLayout(parent) { setSpacing(spacing); }

FlowLayout::~FlowLayout() {
    while (QLayoutItem* item = takeAt(0)) delete item;
}

void FlowLayout::addItem(QLayoutItem* item) { items_.append(item); }

QLayoutItem* FlowLayout::itemAt(int index) const {
    return index >= 0 && index < items_.size() ? items_.at(index) : nullptr;
}

QLayoutItem* FlowLayout::takeAt(int index) {
    return index >= 0 && index < items_.size() ? items_.takeAt(index) : nullptr;
}

int FlowLayout::heightForWidth(int width) const { return doLayout(QRect(0, 0, width, 0), true); }

QSize FlowLayout::minimumSize() const {
    QSize size;
    for (const QLayoutItem* item : items_) size = size.expandedTo(item->minimumSize());
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

QSize FlowLayout::sizeHint() const {
    // As wide as the widest item (the layout wraps to whatever width it gets), as tall as one row.
    return minimumSize();
}

void FlowLayout::setGeometry(const QRect& rect) {
    QLayout::setGeometry(rect);
    doLayout(rect, false);
}

int FlowLayout::doLayout(const QRect& rect, bool test_only) const {
    const QMargins m = contentsMargins();
    const QRect area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom());
    int x = area.x();
    int y = area.y();
    int line_height = 0;
    for (QLayoutItem* item : items_) {
        if (item->isEmpty()) continue;
        const QSize hint = item->sizeHint().boundedTo(QSize(std::max(1, area.width()), QWIDGETSIZE_MAX));
        int next_x = x + hint.width() + spacing();
        if (next_x - spacing() > area.right() + 1 && line_height > 0) {  // wrap
            x = area.x();
            y += line_height + spacing();
            next_x = x + hint.width() + spacing();
            line_height = 0;
        }
        if (!test_only) item->setGeometry(QRect(QPoint(x, y), hint));
        x = next_x;
        line_height = std::max(line_height, hint.height());
    }
    return y + line_height - rect.y() + m.bottom();
}

}  // namespace sl::desktop
