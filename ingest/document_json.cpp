#include "ingest/document_json.h"

#include <QJsonArray>
#include <QJsonDocument>

namespace sl::ingest {

namespace {

QString qs(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

QJsonArray box(const doc::BBox& b) { return {b.x0, b.y0, b.x1, b.y1}; }

QJsonObject block_json(const doc::Block& b, bool with_lines) {
    QJsonObject o{{QStringLiteral("role"), QLatin1String(doc::to_string(b.role))}, {QStringLiteral("text"), qs(b.text)}};
    if (b.bbox) o[QStringLiteral("bbox")] = box(*b.bbox);
    if (b.time) {
        o[QStringLiteral("t0")] = b.time->t0;
        o[QStringLiteral("t1")] = b.time->t1;
    }
    if (b.confidence < 1.0f) o[QStringLiteral("confidence")] = b.confidence;
    if (with_lines && !b.lines.empty()) {
        QJsonArray lines;
        for (const auto& l : b.lines) lines.append(QJsonObject{{QStringLiteral("text"), qs(l.text)}, {QStringLiteral("bbox"), box(l.bbox)}});
        o[QStringLiteral("lines")] = lines;
    }
    return o;
}

QJsonObject visual_json(const doc::Visual& v) {
    QJsonObject o{{QStringLiteral("kind"), QLatin1String(doc::to_string(v.kind))},
                  {QStringLiteral("width"), v.width},
                  {QStringLiteral("height"), v.height},
                  {QStringLiteral("locator"), qs(v.locator)}};
    if (v.bbox) o[QStringLiteral("bbox")] = box(*v.bbox);
    if (v.timestamp) o[QStringLiteral("timestamp")] = *v.timestamp;
    if (!v.mime.empty()) o[QStringLiteral("mime")] = qs(v.mime);
    return o;
}

}  // namespace

QJsonObject to_json(const doc::Document& d, bool with_lines) {
    QJsonObject meta;
    for (const auto& [k, v] : d.metadata) meta[qs(k)] = qs(v);
    QJsonArray units;
    for (const auto& u : d.units) {
        QJsonObject uo{{QStringLiteral("kind"), QLatin1String(doc::to_string(u.kind))},
                       {QStringLiteral("index"), u.index},
                       {QStringLiteral("label"), qs(u.label)},
                       {QStringLiteral("width"), u.width},
                       {QStringLiteral("height"), u.height}};
        if (u.rotation) uo[QStringLiteral("rotation")] = u.rotation;
        if (u.time) {
            uo[QStringLiteral("t0")] = u.time->t0;
            uo[QStringLiteral("t1")] = u.time->t1;
        }
        QJsonArray blocks, visuals;
        for (const auto& b : u.blocks) blocks.append(block_json(b, with_lines));
        for (const auto& v : u.visuals) visuals.append(visual_json(v));
        uo[QStringLiteral("blocks")] = blocks;
        uo[QStringLiteral("visuals")] = visuals;
        units.append(uo);
    }
    QJsonArray outline;
    for (const auto& e : d.outline) {
        QJsonObject eo{{QStringLiteral("title"), qs(e.title)}, {QStringLiteral("level"), e.level}};
        if (e.unit >= 0) eo[QStringLiteral("unit")] = e.unit;
        if (e.time) eo[QStringLiteral("time")] = *e.time;
        outline.append(eo);
    }
    QJsonArray links;
    for (const auto& l : d.links) {
        QJsonObject lo{{QStringLiteral("unit"), l.unit}, {QStringLiteral("bbox"), box(l.bbox)}};
        if (!l.uri.empty()) lo[QStringLiteral("uri")] = qs(l.uri);
        if (l.target_unit >= 0) lo[QStringLiteral("target_unit")] = l.target_unit;
        links.append(lo);
    }
    QJsonObject o{{QStringLiteral("path"), qs(d.path)},
                  {QStringLiteral("id"), qs(d.id)},
                  {QStringLiteral("kind"), QLatin1String(doc::to_string(d.kind))},
                  {QStringLiteral("title"), qs(d.title)},
                  {QStringLiteral("metadata"), meta},
                  {QStringLiteral("units"), units},
                  {QStringLiteral("outline"), outline},
                  {QStringLiteral("links"), links}};
    if (d.duration > 0) o[QStringLiteral("duration")] = d.duration;
    return o;
}

QByteArray to_json_bytes(const doc::Document& d, bool with_lines) {
    return QJsonDocument(to_json(d, with_lines)).toJson(QJsonDocument::Indented);
}

}  // namespace sl::ingest
