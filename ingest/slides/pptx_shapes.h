// The shape tree of one PresentationML part (slide, slide layout, slide master, notes slide):
// text shapes (p:sp), tables (p:graphicFrame/a:tbl, one entry per cell), pictures (p:pic) and
// groups (p:grpSp, flattened with their transforms applied), in document (z) order.
// Positions stay in EMU (English Metric Units, 914400 per inch, 12700 per point) in the part's
// coordinates; the reader normalizes them by the slide size.
//
// Threading: pure function over bytes the caller owns.
#pragma once

#include <QByteArray>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sl::ingest::pptx {

struct EmuRect {
    double x = 0, y = 0, cx = 0, cy = 0;
};

struct Shape {
    enum class Kind { Text, TableCell, Picture };
    Kind kind = Kind::Text;
    bool placeholder = false;       // has p:nvPr/p:ph
    std::string ph_type;            // p:ph type as written ("" when absent: "obj")
    std::optional<int64_t> ph_idx;  // p:ph idx
    std::optional<EmuRect> rect;    // own a:xfrm (p:xfrm for frames), group transforms applied
    bool in_group = false;
    std::string text;   // UTF-8; paragraphs joined with '\n', trailing blanks trimmed
    std::string embed;  // picture: r:embed relationship id
};

struct ShapeTreeLimits {
    int max_group_depth = 32;      // deeper groups are skipped
    size_t max_shapes = 200000;    // further shapes are skipped
    int max_table_cells = 100000;  // per table
};

// Parses the first p:spTree of `xml`. Throws IngestError(Corrupt) naming `path` and `part` (with
// the line) when the XML is malformed. A part without a shape tree gives no shapes.
std::vector<Shape> parse_shape_tree(const QByteArray& xml, const std::string& path,
                                    const std::string& part, const ShapeTreeLimits& limits = {});

}  // namespace sl::ingest::pptx
