#include "app/common/answer_json.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "core/util/error.h"

namespace sl::app {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
std::string ss(const QJsonValue& v) { return v.toString().toStdString(); }

}  // namespace

std::string answer_to_json(const Answer& a) {
    QJsonObject o;
    o[QStringLiteral("version")] = 1;
    o[QStringLiteral("question")] = qs(a.question);
    o[QStringLiteral("text")] = qs(a.text);
    o[QStringLiteral("document_mass")] = a.document_mass;
    o[QStringLiteral("steps")] = a.steps;
    QJsonArray sentences;
    for (const auto& s : a.sentences) {
        QJsonObject so;
        so[QStringLiteral("begin")] = static_cast<qint64>(s.begin);
        so[QStringLiteral("end")] = static_cast<qint64>(s.end);
        QJsonArray sups;
        for (const auto& p : s.supports) {
            QJsonObject po;
            po[QStringLiteral("citation")] = p.citation;
            po[QStringLiteral("mass")] = p.mass;
            po[QStringLiteral("lexical")] = p.lexical;
            if (p.semantic) po[QStringLiteral("semantic")] = *p.semantic;
            po[QStringLiteral("verified")] = p.verified;
            po[QStringLiteral("weak")] = p.weak;
            sups.append(po);
        }
        so[QStringLiteral("supports")] = sups;
        sentences.append(so);
    }
    o[QStringLiteral("sentences")] = sentences;
    QJsonArray cits;
    for (const auto& c : a.citations) {
        QJsonObject co;
        co[QStringLiteral("number")] = c.number;
        co[QStringLiteral("unit")] = c.unit;
        co[QStringLiteral("locator")] = qs(c.locator);
        co[QStringLiteral("path")] = qs(c.path);
        co[QStringLiteral("kind")] = static_cast<int>(c.kind);
        co[QStringLiteral("document")] = qs(c.ref.document);
        co[QStringLiteral("unit_index")] = c.ref.unit;
        if (c.ref.bbox)
            co[QStringLiteral("bbox")] = QJsonArray{c.ref.bbox->x0, c.ref.bbox->y0, c.ref.bbox->x1, c.ref.bbox->y1};
        if (c.ref.time) co[QStringLiteral("time")] = QJsonArray{c.ref.time->t0, c.ref.time->t1};
        co[QStringLiteral("mass")] = c.mass;
        co[QStringLiteral("share")] = c.share;
        co[QStringLiteral("begin")] = static_cast<qint64>(c.begin);
        co[QStringLiteral("end")] = static_cast<qint64>(c.end);
        co[QStringLiteral("snippet")] = qs(c.snippet);
        co[QStringLiteral("text")] = qs(c.text);
        cits.append(co);
    }
    o[QStringLiteral("citations")] = cits;
    return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

Answer answer_from_json(const std::string& json, const std::string& what) {
    QJsonParseError err{};
    const QJsonDocument d = QJsonDocument::fromJson(QByteArray::fromStdString(json), &err);
    if (d.isNull() || !d.isObject())
        throw FormatError(what + ": not an answer (" + err.errorString().toStdString() + ")");
    const QJsonObject o = d.object();
    if (o[QStringLiteral("version")].toInt() != 1) throw FormatError(what + ": unknown answer format version");
    Answer a;
    a.question = ss(o[QStringLiteral("question")]);
    a.text = ss(o[QStringLiteral("text")]);
    a.document_mass = o[QStringLiteral("document_mass")].toDouble();
    a.steps = o[QStringLiteral("steps")].toInt();
    for (const auto& cv : o[QStringLiteral("citations")].toArray()) {
        const QJsonObject co = cv.toObject();
        Citation c;
        c.number = co[QStringLiteral("number")].toInt();
        c.unit = co[QStringLiteral("unit")].toInt();
        c.locator = ss(co[QStringLiteral("locator")]);
        c.path = ss(co[QStringLiteral("path")]);
        const int kind = co[QStringLiteral("kind")].toInt();
        if (kind < 0 || kind > static_cast<int>(doc::DocumentKind::Audio)) throw FormatError(what + ": bad document kind");
        c.kind = static_cast<doc::DocumentKind>(kind);
        c.ref.document = ss(co[QStringLiteral("document")]);
        c.ref.unit = co[QStringLiteral("unit_index")].toInt();
        if (co.contains(QStringLiteral("bbox"))) {
            const QJsonArray b = co[QStringLiteral("bbox")].toArray();
            if (b.size() != 4) throw FormatError(what + ": bbox needs 4 numbers");
            c.ref.bbox = doc::BBox{static_cast<float>(b[0].toDouble()), static_cast<float>(b[1].toDouble()),
                                   static_cast<float>(b[2].toDouble()), static_cast<float>(b[3].toDouble())};
        }
        if (co.contains(QStringLiteral("time"))) {
            const QJsonArray t = co[QStringLiteral("time")].toArray();
            if (t.size() != 2) throw FormatError(what + ": time needs 2 numbers");
            c.ref.time = doc::TimeRange{t[0].toDouble(), t[1].toDouble()};
        }
        c.mass = co[QStringLiteral("mass")].toDouble();
        c.share = co[QStringLiteral("share")].toDouble();
        c.begin = co[QStringLiteral("begin")].toInteger();
        c.end = co[QStringLiteral("end")].toInteger();
        c.snippet = ss(co[QStringLiteral("snippet")]);
        c.text = ss(co[QStringLiteral("text")]);
        a.citations.push_back(std::move(c));
    }
    const auto n_cit = static_cast<int>(a.citations.size());
    for (const auto& sv : o[QStringLiteral("sentences")].toArray()) {
        const QJsonObject so = sv.toObject();
        AnswerSentence s;
        s.begin = static_cast<size_t>(so[QStringLiteral("begin")].toInteger());
        s.end = static_cast<size_t>(so[QStringLiteral("end")].toInteger());
        if (s.begin > s.end || s.end > a.text.size()) throw FormatError(what + ": sentence outside the text");
        for (const auto& pv : so[QStringLiteral("supports")].toArray()) {
            const QJsonObject po = pv.toObject();
            Support p;
            p.citation = po[QStringLiteral("citation")].toInt(-1);
            if (p.citation < 0 || p.citation >= n_cit) throw FormatError(what + ": support names no citation");
            p.mass = po[QStringLiteral("mass")].toDouble();
            p.lexical = po[QStringLiteral("lexical")].toDouble();
            if (po.contains(QStringLiteral("semantic"))) p.semantic = po[QStringLiteral("semantic")].toDouble();
            p.verified = po[QStringLiteral("verified")].toBool();
            p.weak = po[QStringLiteral("weak")].toBool();
            s.supports.push_back(p);
        }
        a.sentences.push_back(std::move(s));
    }
    return a;
}

}  // namespace sl::app
