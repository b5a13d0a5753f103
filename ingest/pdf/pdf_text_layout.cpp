#include "ingest/pdf/pdf_text_layout.h"

#include <algorithm>
#include <cmath>

namespace sl::ingest {

namespace {

struct Line {
    QRectF box;  // points
    QString text;
};

bool finite_box(const QRectF& r) {
    return std::isfinite(r.x()) && std::isfinite(r.y()) && std::isfinite(r.width()) &&
           std::isfinite(r.height()) && r.width() >= 0 && r.height() >= 0;
}

// Whether `w` continues the line whose last word is `prev`: same baseline (within half a line
// height) and not going back to the left.
bool continues_line(const QRectF& prev, const QRectF& w) {
    const double h = std::max({prev.height(), w.height(), 1e-3});
    const double dy = std::abs(prev.bottom() - w.bottom());
    return dy <= 0.5 * h && w.left() >= prev.left() - 0.5 * h;
}

// Whether line `cur` starts a new block after `prev`.
bool starts_block(const Line& prev, const Line& cur) {
    const double hp = std::max(prev.box.height(), 1e-3);
    const double hc = std::max(cur.box.height(), 1e-3);
    const double h = std::min(hp, hc);
    const double gap = cur.box.top() - prev.box.bottom();
    if (gap > 0.9 * h) return true;                             // about a blank line
    if (cur.box.top() < prev.box.top() - 0.5 * h) return true;  // jumped up: next column
    if (std::max(hp, hc) > 1.3 * h) return true;                // text size changed (heading)
    const bool overlap_x = cur.box.left() < prev.box.right() && prev.box.left() < cur.box.right();
    return !overlap_x;
}

doc::Block make_block(const std::vector<Line>& lines, size_t begin, size_t end, QSizeF page) {
    doc::Block b;
    b.role = doc::BlockRole::Body;
    QRectF box;
    QString text;
    b.lines.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
        const Line& l = lines[i];
        box = box.isNull() ? l.box : box.united(l.box);
        if (i > begin) text += QLatin1Char('\n');
        text += l.text;
        b.lines.push_back({l.text.toStdString(), normalize_box(l.box, page)});
    }
    b.text = text.toStdString();
    b.bbox = normalize_box(box, page);
    return b;
}

}  // namespace

doc::BBox normalize_box(const QRectF& r, QSizeF page) {
    const double w = page.width(), h = page.height();
    if (!(w > 1e-6) || !(h > 1e-6) || !std::isfinite(w) || !std::isfinite(h) || !finite_box(r))
        return {0, 0, 1, 1};
    auto clamp01 = [](double v) { return static_cast<float>(std::clamp(v, 0.0, 1.0)); };
    const QRectF n = r.normalized();
    return {clamp01(n.left() / w), clamp01(n.top() / h), clamp01(n.right() / w),
            clamp01(n.bottom() / h)};
}

doc::BBox rotate_box(const doc::BBox& b, int rotation) {
    switch (((rotation % 360) + 360) % 360) {
        case 90:
            return {1 - b.y1, b.x0, 1 - b.y0, b.x1};
        case 180:
            return {1 - b.x1, 1 - b.y1, 1 - b.x0, 1 - b.y0};
        case 270:
            return {b.y0, 1 - b.x1, b.y1, 1 - b.x0};
        default:
            return b;
    }
}

std::vector<doc::Block> layout_blocks(const std::vector<PdfWord>& words, QSizeF page_size,
                                      int rotation) {
    // Words -> lines.
    std::vector<Line> lines;
    bool open = false;   // lines.back() may take more words
    bool space = false;  // the previous word wants a space before the next
    QRectF prev_word;
    for (const PdfWord& w : words) {
        const QString t = w.text.trimmed();
        if (t.isEmpty() || !finite_box(w.box)) continue;
        if (open && continues_line(prev_word, w.box)) {
            Line& l = lines.back();
            if (space) l.text += QLatin1Char(' ');
            l.text += t;
            l.box = l.box.united(w.box);
        } else {
            lines.push_back({w.box, t});
        }
        prev_word = w.box;
        space = w.space_after;
        open = !w.ends_line;
    }
    if (lines.empty()) return {};

    // Lines -> blocks.
    std::vector<doc::Block> blocks;
    size_t begin = 0;
    for (size_t i = 1; i <= lines.size(); ++i) {
        if (i == lines.size() || starts_block(lines[i - 1], lines[i])) {
            blocks.push_back(make_block(lines, begin, i, page_size));
            begin = i;
        }
    }

    // Titles: short blocks whose every line is markedly taller than the page's median line.
    std::vector<double> heights;
    heights.reserve(lines.size());
    for (const Line& l : lines) heights.push_back(l.box.height());
    std::nth_element(heights.begin(), heights.begin() + static_cast<long>(heights.size() / 2),
                     heights.end());
    const double median = heights[heights.size() / 2];
    const double page_h = std::max(page_size.height(), 1e-6);
    for (doc::Block& b : blocks) {
        if (b.lines.size() > 3 || b.text.size() > 200) continue;
        bool tall = true;
        for (const doc::Span& s : b.lines)
            tall = tall && (s.bbox.y1 - s.bbox.y0) * page_h >= 1.35 * median;
        if (tall && lines.size() > 1) b.role = doc::BlockRole::Title;
    }
    if (rotation % 360 != 0) {
        for (doc::Block& b : blocks) {
            b.bbox = rotate_box(*b.bbox, rotation);
            for (doc::Span& s : b.lines) s.bbox = rotate_box(s.bbox, rotation);
        }
    }
    return blocks;
}

}  // namespace sl::ingest
