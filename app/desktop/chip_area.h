// A strip of small widgets (the citation chips under an answer) that wraps them onto new lines
// (flow_layout.h) and, past `max_rows` lines, scrolls instead of growing: however many chips, it
// is never wider than its pane and never taller than a few lines. GUI thread only.
#pragma once

#include <QScrollArea>

namespace sl::desktop {

class FlowLayout;

class ChipArea : public QScrollArea {
    Q_OBJECT

public:
    explicit ChipArea(int max_rows = 3, QWidget* parent = nullptr);

    // The widget the chips go into (children of it, added to flow()).
    QWidget* content() const { return content_; }
    FlowLayout* flow() const { return flow_; }
    // Fits the height to the chips at the current width (call after adding or removing chips).
    void updateHeight();

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    int wantedHeight(int width) const;

    int max_rows_;
    QWidget* content_;
    FlowLayout* flow_;
};

}  // namespace sl::desktop
