#include "ingest/slides/pptx_shapes.h"

#include <QXmlStreamReader>

#include <algorithm>

#include "ingest/slides/ooxml_xml.h"

namespace sl::ingest::pptx {

namespace {

using ooxml::attr;
using ooxml::attr_int;
using ooxml::is;
using L = QLatin1String;

// Child coordinates of a group -> slide coordinates: X = ox + sx * x.
struct Transform {
    double ox = 0, oy = 0, sx = 1, sy = 1;
    EmuRect apply(const EmuRect& r) const {
        return {ox + sx * r.x, oy + sy * r.y, sx * r.cx, sy * r.cy};
    }
};

// a:xfrm / p:xfrm as written; absent parts stay empty.
struct Xfrm {
    std::optional<int64_t> x, y, cx, cy, ch_x, ch_y, ch_cx, ch_cy;
    std::optional<EmuRect> rect() const {
        if (!x || !y || !cx || !cy || *cx < 0 || *cy < 0) return std::nullopt;
        return EmuRect{static_cast<double>(*x), static_cast<double>(*y), static_cast<double>(*cx),
                       static_cast<double>(*cy)};
    }
};

void trim_trailing(std::string& s) {
    while (!s.empty() &&
           (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.pop_back();
}

// Recursive descent over one shape tree. Recursion happens only through groups and
// mc:AlternateContent, bounded by limits.max_group_depth; every other loop is iterative.
class Parser {
public:
    Parser(QXmlStreamReader& x, const ShapeTreeLimits& limits, std::vector<Shape>& out)
        : x_(x), limits_(limits), out_(out) {}

    // The current element is p:spTree; its own transform is ignored (PowerPoint does too).
    void tree() { children({}, 0, false, true); }

private:
    bool full() const { return out_.size() >= limits_.max_shapes; }

    // The shapes among the children of the current element (spTree, grpSp, mc:Choice).
    void children(const Transform& parent, int depth, bool in_group, bool root) {
        Transform t = parent;
        while (x_.readNextStartElement()) {
            if (is(x_, L("grpSpPr"))) {
                if (root)
                    x_.skipCurrentElement();
                else
                    t = group_transform(parent);
            } else {
                dispatch(t, depth, in_group);
            }
        }
    }

    void dispatch(const Transform& t, int depth, bool in_group) {
        if (full()) {
            x_.skipCurrentElement();
        } else if (is(x_, L("sp"))) {
            text_shape(t, in_group);
        } else if (is(x_, L("pic"))) {
            picture(t, in_group);
        } else if (is(x_, L("graphicFrame"))) {
            frame(t, in_group);
        } else if (is(x_, L("grpSp")) && depth + 1 < limits_.max_group_depth) {
            children(t, depth + 1, true, false);
        } else if (is(x_, L("AlternateContent")) && depth + 1 < limits_.max_group_depth) {
            alternate(t, depth + 1, in_group);
        } else {
            x_.skipCurrentElement();  // connectors, content parts, too-deep groups, extensions
        }
    }

    // mc:AlternateContent: the first of mc:Choice / mc:Fallback, the others skipped.
    void alternate(const Transform& t, int depth, bool in_group) {
        bool done = false;
        while (x_.readNextStartElement()) {
            if (!done && (is(x_, L("Choice")) || is(x_, L("Fallback")))) {
                done = true;
                while (x_.readNextStartElement()) dispatch(t, depth, in_group);
            } else {
                x_.skipCurrentElement();
            }
        }
    }

    // The current element is p:grpSpPr: the group's transform composed with the parent's.
    Transform group_transform(const Transform& parent) {
        Xfrm f;
        while (x_.readNextStartElement()) {
            if (is(x_, L("xfrm")))
                f = xfrm();
            else
                x_.skipCurrentElement();
        }
        const double ox = static_cast<double>(f.x.value_or(0));
        const double oy = static_cast<double>(f.y.value_or(0));
        const double ex = static_cast<double>(f.cx.value_or(0));
        const double ey = static_cast<double>(f.cy.value_or(0));
        const double cox = f.ch_x ? static_cast<double>(*f.ch_x) : ox;
        const double coy = f.ch_y ? static_cast<double>(*f.ch_y) : oy;
        const double cex = f.ch_cx ? static_cast<double>(*f.ch_cx) : ex;
        const double cey = f.ch_cy ? static_cast<double>(*f.ch_cy) : ey;
        const double kx = cex > 0 && ex >= 0 ? ex / cex : 1.0;
        const double ky = cey > 0 && ey >= 0 ? ey / cey : 1.0;
        Transform t;
        t.sx = parent.sx * kx;
        t.sy = parent.sy * ky;
        t.ox = parent.ox + parent.sx * (ox - cox * kx);
        t.oy = parent.oy + parent.sy * (oy - coy * ky);
        return t;
    }

    // The current element is a:xfrm or p:xfrm.
    Xfrm xfrm() {
        Xfrm f;
        while (x_.readNextStartElement()) {
            if (is(x_, L("off"))) {
                f.x = attr_int(x_, L("x"));
                f.y = attr_int(x_, L("y"));
            } else if (is(x_, L("ext"))) {
                f.cx = attr_int(x_, L("cx"));
                f.cy = attr_int(x_, L("cy"));
            } else if (is(x_, L("chOff"))) {
                f.ch_x = attr_int(x_, L("x"));
                f.ch_y = attr_int(x_, L("y"));
            } else if (is(x_, L("chExt"))) {
                f.ch_cx = attr_int(x_, L("cx"));
                f.ch_cy = attr_int(x_, L("cy"));
            }
            x_.skipCurrentElement();
        }
        return f;
    }

    // The current element is p:nvSpPr / p:nvPicPr / p:nvGraphicFramePr: finds p:nvPr/p:ph.
    void non_visual(Shape& s) {
        while (x_.readNextStartElement()) {
            if (!is(x_, L("nvPr"))) {
                x_.skipCurrentElement();
                continue;
            }
            while (x_.readNextStartElement()) {
                if (is(x_, L("ph"))) {
                    s.placeholder = true;
                    s.ph_type = attr(x_, L("type")).toString().toStdString();
                    s.ph_idx = attr_int(x_, L("idx"));
                }
                x_.skipCurrentElement();
            }
        }
    }

    // The current element is p:spPr: its a:xfrm, when present.
    std::optional<EmuRect> shape_properties(const Transform& t) {
        std::optional<EmuRect> rect;
        while (x_.readNextStartElement()) {
            if (is(x_, L("xfrm"))) {
                if (const auto r = xfrm().rect()) rect = t.apply(*r);
            } else {
                x_.skipCurrentElement();
            }
        }
        return rect;
    }

    // The current element is p:txBody / a:txBody.
    std::string text_body() {
        std::string text;
        bool first = true;
        while (x_.readNextStartElement()) {
            if (!is(x_, L("p"))) {
                x_.skipCurrentElement();
                continue;
            }
            if (!first) text += '\n';
            first = false;
            paragraph(text);
        }
        trim_trailing(text);
        return text;
    }

    // The current element is a:p: runs (a:r), fields (a:fld) and breaks (a:br).
    void paragraph(std::string& text) {
        while (x_.readNextStartElement()) {
            if (is(x_, L("r")) || is(x_, L("fld"))) {
                while (x_.readNextStartElement()) {
                    if (is(x_, L("t")))
                        text += ooxml::element_text(x_);
                    else
                        x_.skipCurrentElement();
                }
            } else {
                if (is(x_, L("br"))) text += '\n';
                x_.skipCurrentElement();
            }
        }
    }

    void text_shape(const Transform& t, bool in_group) {
        Shape s;
        s.kind = Shape::Kind::Text;
        s.in_group = in_group;
        while (x_.readNextStartElement()) {
            if (is(x_, L("nvSpPr")))
                non_visual(s);
            else if (is(x_, L("spPr")))
                s.rect = shape_properties(t);
            else if (is(x_, L("txBody")))
                s.text = text_body();
            else
                x_.skipCurrentElement();
        }
        out_.push_back(std::move(s));
    }

    void picture(const Transform& t, bool in_group) {
        Shape s;
        s.kind = Shape::Kind::Picture;
        s.in_group = in_group;
        while (x_.readNextStartElement()) {
            if (is(x_, L("nvPicPr"))) {
                non_visual(s);
            } else if (is(x_, L("spPr"))) {
                s.rect = shape_properties(t);
            } else if (is(x_, L("blipFill"))) {
                while (x_.readNextStartElement()) {
                    if (is(x_, L("blip")))
                        s.embed = ooxml::rel_attr(x_, L("embed")).toString().toStdString();
                    x_.skipCurrentElement();
                }
            } else {
                x_.skipCurrentElement();
            }
        }
        out_.push_back(std::move(s));
    }

    // p:graphicFrame: tables become one shape per cell; charts and diagrams are skipped.
    void frame(const Transform& t, bool in_group) {
        std::optional<EmuRect> rect;
        while (x_.readNextStartElement()) {
            if (is(x_, L("xfrm"))) {
                rect = xfrm().rect();
            } else if (is(x_, L("graphic"))) {
                while (x_.readNextStartElement()) {
                    if (!is(x_, L("graphicData"))) {
                        x_.skipCurrentElement();
                        continue;
                    }
                    while (x_.readNextStartElement()) {
                        if (is(x_, L("tbl")))
                            table(rect, t, in_group);
                        else
                            x_.skipCurrentElement();
                    }
                }
            } else {
                x_.skipCurrentElement();
            }
        }
    }

    // The current element is a:tbl. Cells covered by a merge (hMerge/vMerge) are skipped; spans
    // (gridSpan/rowSpan) widen the cell's box.
    void table(const std::optional<EmuRect>& frame, const Transform& t, bool in_group) {
        constexpr int64_t kMaxSpan = 10000;
        struct Cell {
            int64_t row = 0, col = 0, cols = 1, rows = 1;
            std::string text;
        };
        std::vector<double> widths, heights;
        std::vector<Cell> cells;
        int64_t cell_count = 0;
        while (x_.readNextStartElement()) {
            if (is(x_, L("tblGrid"))) {
                while (x_.readNextStartElement()) {
                    if (is(x_, L("gridCol")) && widths.size() < kMaxSpan)
                        widths.push_back(static_cast<double>(
                            std::max<int64_t>(0, attr_int(x_, L("w")).value_or(0))));
                    x_.skipCurrentElement();
                }
            } else if (is(x_, L("tr")) && heights.size() < static_cast<size_t>(kMaxSpan)) {
                const int64_t row = static_cast<int64_t>(heights.size());
                heights.push_back(
                    static_cast<double>(std::max<int64_t>(0, attr_int(x_, L("h")).value_or(0))));
                int64_t col = 0;
                while (x_.readNextStartElement()) {
                    if (!is(x_, L("tc")) || ++cell_count > limits_.max_table_cells) {
                        x_.skipCurrentElement();
                        continue;
                    }
                    Cell c;
                    c.row = row;
                    c.col = col;
                    c.cols =
                        std::clamp<int64_t>(attr_int(x_, L("gridSpan")).value_or(1), 1, kMaxSpan);
                    c.rows =
                        std::clamp<int64_t>(attr_int(x_, L("rowSpan")).value_or(1), 1, kMaxSpan);
                    const bool merged = attr_int(x_, L("hMerge")).value_or(0) != 0 ||
                                        attr_int(x_, L("vMerge")).value_or(0) != 0 ||
                                        attr(x_, L("hMerge")) == L("true") ||
                                        attr(x_, L("vMerge")) == L("true");
                    col = std::min<int64_t>(col + 1,
                                            kMaxSpan);  // spanned columns have their own a:tc
                    while (x_.readNextStartElement()) {
                        if (is(x_, L("txBody")) && !merged)
                            c.text = text_body();
                        else
                            x_.skipCurrentElement();
                    }
                    if (!merged && !c.text.empty()) cells.push_back(std::move(c));
                }
            } else {
                x_.skipCurrentElement();
            }
        }
        // Box of columns [a, b) / rows [a, b) from prefix sums over what the grid declares.
        auto prefix = [](const std::vector<double>& v) {
            std::vector<double> p(v.size() + 1, 0.0);
            for (size_t i = 0; i < v.size(); ++i) p[i + 1] = p[i] + v[i];
            return p;
        };
        const std::vector<double> px = prefix(widths), py = prefix(heights);
        auto span = [](const std::vector<double>& p, int64_t a, int64_t b, double& start,
                       double& size) {
            const auto n = static_cast<int64_t>(p.size()) - 1;
            if (a >= n) return false;
            b = std::min(b, n);
            start = p[static_cast<size_t>(a)];
            size = p[static_cast<size_t>(b)] - start;
            return true;
        };
        for (auto& c : cells) {
            if (full()) break;
            Shape s;
            s.kind = Shape::Kind::TableCell;
            s.in_group = in_group;
            s.text = std::move(c.text);
            double x0 = 0, w = 0, y0 = 0, h = 0;
            if (frame && span(px, c.col, c.col + c.cols, x0, w) &&
                span(py, c.row, c.row + c.rows, y0, h))
                s.rect = t.apply(EmuRect{frame->x + x0, frame->y + y0, w, h});
            out_.push_back(std::move(s));
        }
    }

    QXmlStreamReader& x_;
    const ShapeTreeLimits& limits_;
    std::vector<Shape>& out_;
};

}  // namespace

std::vector<Shape> parse_shape_tree(const QByteArray& xml, const std::string& path,
                                    const std::string& part, const ShapeTreeLimits& limits) {
    std::vector<Shape> shapes;
    QXmlStreamReader x(xml);
    if (ooxml::find_element(x, L("spTree"))) {
        Parser p(x, limits, shapes);
        p.tree();
        // Read to the end so malformed XML after the tree is reported too.
        while (!x.atEnd()) x.readNext();
    }
    ooxml::check(x, path, part);
    return shapes;
}

}  // namespace sl::ingest::pptx
