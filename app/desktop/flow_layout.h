// A layout that places its items left to right and wraps them onto the next line when the width
// runs out (Qt's flow layout example): a row of citation chips grows down, never wider than the
// pane that holds it. Its minimum width is that of its widest item; it has a height for width.
// GUI thread only, like every layout.
#pragma once

#include <QLayout>
#include <QList>

namespace sl::desktop {

class FlowLayout : public QLayout {
public:
    explicit FlowLayout(QWidget* parent = nullptr, int spacing = 4);
    ~FlowLayout() override;

    void addItem(QLayoutItem* item) override;
    int count() const override { return static_cast<int>(items_.size()); }
    QLayoutItem* itemAt(int index) const override;
    QLayoutItem* takeAt(int index) override;

    Qt::Orientations expandingDirections() const override { return {}; }
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize minimumSize() const override;
    QSize sizeHint() const override;
    void setGeometry(const QRect& rect) override;

private:
    // Lays the items out in `rect` (moving them unless test_only); returns the height used.
    int doLayout(const QRect& rect, bool test_only) const;

    QList<QLayoutItem*> items_;  // owned
};

}  // namespace sl::desktop
