// Helpers of the library suites: field-by-field Document comparison, a synthetic Document that
// uses every field of the model, sample paths, and raw SQL counts.
#pragma once

#include <QString>
#include <QTest>

#include <sqlite3.h>

#include <string>

#include "core/document/document.h"
#include "core/library/library.h"

namespace sl::test {

// Compares a and b field for field (floats exactly); on a difference fails the current test with
// the place ("unit 3 block 2 text") and returns false.
inline bool same_document(const doc::Document& a, const doc::Document& b, bool lines = true, bool bytes = true) {
    auto fail = [](const std::string& where) {
        QTest::qFail(("documents differ at " + where).c_str(), __FILE__, __LINE__);
        return false;
    };
    auto box_eq = [](const std::optional<doc::BBox>& x, const std::optional<doc::BBox>& y) {
        if (x.has_value() != y.has_value()) return false;
        return !x || (x->x0 == y->x0 && x->y0 == y->y0 && x->x1 == y->x1 && x->y1 == y->y1);
    };
    auto time_eq = [](const std::optional<doc::TimeRange>& x, const std::optional<doc::TimeRange>& y) {
        if (x.has_value() != y.has_value()) return false;
        return !x || (x->t0 == y->t0 && x->t1 == y->t1);
    };
    if (a.id != b.id) return fail("id");
    if (a.path != b.path) return fail("path");
    if (a.kind != b.kind) return fail("kind");
    if (a.title != b.title) return fail("title");
    if (a.metadata != b.metadata) return fail("metadata");
    if (a.duration != b.duration) return fail("duration");
    if (a.units.size() != b.units.size())
        return fail("unit count " + std::to_string(a.units.size()) + " vs " + std::to_string(b.units.size()));
    for (size_t i = 0; i < a.units.size(); ++i) {
        const auto& u = a.units[i];
        const auto& v = b.units[i];
        const std::string at = "unit " + std::to_string(i);
        if (u.kind != v.kind || u.index != v.index || u.label != v.label) return fail(at + " kind/index/label");
        if (!time_eq(u.time, v.time)) return fail(at + " time");
        if (u.width != v.width || u.height != v.height || u.rotation != v.rotation) return fail(at + " size");
        if (u.blocks.size() != v.blocks.size()) return fail(at + " block count");
        for (size_t j = 0; j < u.blocks.size(); ++j) {
            const auto& x = u.blocks[j];
            const auto& y = v.blocks[j];
            const std::string bt = at + " block " + std::to_string(j);
            if (x.role != y.role) return fail(bt + " role");
            if (x.text != y.text) return fail(bt + " text");
            if (!box_eq(x.bbox, y.bbox)) return fail(bt + " bbox");
            if (!time_eq(x.time, y.time)) return fail(bt + " time");
            if (x.confidence != y.confidence) return fail(bt + " confidence");
            if (lines) {
                if (x.lines.size() != y.lines.size()) return fail(bt + " line count");
                for (size_t k = 0; k < x.lines.size(); ++k)
                    if (x.lines[k].text != y.lines[k].text || !box_eq(x.lines[k].bbox, y.lines[k].bbox))
                        return fail(bt + " line " + std::to_string(k));
            }
        }
        if (u.visuals.size() != v.visuals.size()) return fail(at + " visual count");
        for (size_t j = 0; j < u.visuals.size(); ++j) {
            const auto& x = u.visuals[j];
            const auto& y = v.visuals[j];
            const std::string vt = at + " visual " + std::to_string(j);
            if (x.kind != y.kind || !box_eq(x.bbox, y.bbox) || x.timestamp != y.timestamp) return fail(vt + " kind/bbox/time");
            if (x.width != y.width || x.height != y.height || x.locator != y.locator || x.mime != y.mime)
                return fail(vt + " size/locator/mime");
            if (bytes && x.encoded != y.encoded) return fail(vt + " bytes");
        }
    }
    if (a.outline.size() != b.outline.size()) return fail("outline count");
    for (size_t i = 0; i < a.outline.size(); ++i) {
        const auto& x = a.outline[i];
        const auto& y = b.outline[i];
        if (x.title != y.title || x.level != y.level || x.unit != y.unit || x.time != y.time)
            return fail("outline " + std::to_string(i));
    }
    if (a.links.size() != b.links.size()) return fail("link count");
    for (size_t i = 0; i < a.links.size(); ++i) {
        const auto& x = a.links[i];
        const auto& y = b.links[i];
        if (x.unit != y.unit || !box_eq(x.bbox, y.bbox) || x.uri != y.uri || x.target_unit != y.target_unit)
            return fail("link " + std::to_string(i));
    }
    return true;
}

// A document that sets every field of the model, with `n_units` units; `seed` varies the content.
inline doc::Document synthetic_document(int n_units, int seed, const std::string& path) {
    doc::Document d;
    d.id = std::string(63, 'a') + static_cast<char>('0' + seed % 10);
    d.path = path;
    d.kind = doc::DocumentKind::Video;
    d.title = "Synthetic \xc3\xa9 title " + std::to_string(seed);
    d.metadata = {{"author", "Ada"}, {"codec", "h264"}, {"seed", std::to_string(seed)}};
    d.duration = 12.345678901234 * n_units;
    for (int i = 0; i < n_units; ++i) {
        doc::Unit u;
        u.kind = i % 2 ? doc::UnitKind::Segment : doc::UnitKind::Page;
        u.index = i;
        u.label = "u" + std::to_string(i);
        if (i % 2) u.time = doc::TimeRange{i * 30.0 + 0.1, i * 30.0 + 30.1};
        u.width = 612.5f + static_cast<float>(seed);
        u.height = 792.25f;
        u.rotation = (i % 4) * 90;
        for (int j = 0; j < 3 + i % 3; ++j) {
            doc::Block b;
            b.role = static_cast<doc::BlockRole>((i + j) % 8);
            b.text = "seed " + std::to_string(seed) + " unit " + std::to_string(i) + " block " + std::to_string(j) +
                     (j == 1 ? std::string("\nzero\0byte", 10) : std::string());
            if (j % 2 == 0) b.bbox = doc::BBox{0.1f / static_cast<float>(j + 1), 0.2f, 0.3f, 0.7f + 1e-7f * static_cast<float>(i)};
            if (j % 3 == 1) b.time = doc::TimeRange{1.0 / 3.0 + i, 2.0 / 3.0 + i};
            b.confidence = 0.5f + 0.01f * static_cast<float>(j);
            if (j == 0) b.lines = {{"line one", {0.1f, 0.1f, 0.5f, 0.15f}}, {"", {0, 0, 0, 0}}, {"\xe2\x82\xac", {0.2f, 0.3f, 0.4f, 0.5f}}};
            u.blocks.push_back(std::move(b));
        }
        if (i % 3 == 0) {
            doc::Visual v;
            v.kind = doc::VisualKind::Frame;
            v.timestamp = i * 30.0 + 1.0 / 7.0;
            v.width = 160;
            v.height = 90;
            v.locator = "frame:pts=" + std::to_string(i);
            v.mime = "image/png";
            for (int k = 0; k < 100 + i; ++k) v.encoded.push_back(static_cast<uint8_t>((k * 7 + seed) & 0xff));
            u.visuals.push_back(std::move(v));
            doc::Visual p;
            p.kind = doc::VisualKind::Picture;
            p.bbox = doc::BBox{0.0f, 0.0f, 1.0f, 0.5f};
            p.locator = "zip:ppt/media/image" + std::to_string(i) + ".png";
            u.visuals.push_back(std::move(p));  // no bytes, no timestamp
        }
        d.units.push_back(std::move(u));
    }
    d.outline = {{"Chapter 1", 0, 0, std::nullopt}, {"Section 1.1", 1, n_units - 1, 42.5}, {"Unresolved", 2, -1, std::nullopt}};
    d.links = {{0, {0.1f, 0.2f, 0.3f, 0.4f}, "https://example.org", -1}, {n_units - 1, {0, 0, 1, 1}, "", 0}};
    return d;
}

// SELECT count(*) ... on the library's connection.
inline int64_t count(const Library& lib, const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(lib.handle(), sql, -1, &s, nullptr) != SQLITE_OK) {
        QTest::qFail((std::string("bad SQL: ") + sql).c_str(), __FILE__, __LINE__);
        return -1;
    }
    int64_t n = -1;
    if (sqlite3_step(s) == SQLITE_ROW) n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

}  // namespace sl::test
