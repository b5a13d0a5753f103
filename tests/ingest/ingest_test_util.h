// Helpers shared by the PDF, OCR and image suites: running poppler-utils, comparing bags of words,
// writing tiny PDFs by hand. Header-only; test code, main thread.
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QString>
#include <QStringList>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/document/document.h"

namespace sl::test {

// stdout of `program args...`; empty with *ok = false when it cannot run or fails.
inline QByteArray run_tool(const QString& program, const QStringList& args, bool* ok = nullptr) {
    QProcess p;
    p.start(program, args);
    const bool done = p.waitForStarted(10000) && p.waitForFinished(300000);
    const bool good = done && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    if (ok) *ok = good;
    return good ? p.readAllStandardOutput() : QByteArray();
}

inline bool have_tool(const char* name) {
    return !QStandardPaths::findExecutable(QString::fromLatin1(name)).isEmpty();
}

// `pdftotext -f N -l N` (raw reading order) of 1-based page `page`.
inline QString pdftotext_page(const std::string& path, int page, bool* ok = nullptr) {
    const QString n = QString::number(page);
    return QString::fromUtf8(
        run_tool(QStringLiteral("pdftotext"),
                 {QStringLiteral("-f"), n, QStringLiteral("-l"), n, QStringLiteral("-enc"),
                  QStringLiteral("UTF-8"), QString::fromStdString(path), QStringLiteral("-")},
                 ok));
}

// Words (split on white space) and their counts. With `loose`, words are lowercased and stripped
// of the punctuation around them (for OCR, which reads quotes and dashes its own way).
inline std::map<QString, int> word_bag(const QString& text, bool loose = false) {
    static const QRegularExpression ws(QStringLiteral("\\s+"));
    static const QRegularExpression edge(QStringLiteral("^\\W+|\\W+$"));
    std::map<QString, int> bag;
    for (QString w : text.split(ws, Qt::SkipEmptyParts)) {
        if (loose) w = w.toLower().remove(edge);
        if (!w.isEmpty()) ++bag[w];
    }
    return bag;
}

inline int bag_size(const std::map<QString, int>& bag) {
    int n = 0;
    for (const auto& [w, c] : bag) n += c;
    return n;
}

// |found ∩ reference| / |reference| over multisets (recall of `reference`'s words in `found`).
inline double bag_recall(const std::map<QString, int>& found,
                         const std::map<QString, int>& reference) {
    int common = 0;
    for (const auto& [w, c] : reference) {
        const auto it = found.find(w);
        if (it != found.end()) common += std::min(c, it->second);
    }
    const int n = bag_size(reference);
    return n ? static_cast<double>(common) / n : 1.0;
}

// The text of a unit's blocks, optionally only those of one role.
inline QString unit_text(const doc::Unit& u, const doc::BlockRole* only = nullptr) {
    QString s;
    for (const doc::Block& b : u.blocks) {
        if (only && b.role != *only) continue;
        s += QString::fromStdString(b.text) + QLatin1Char('\n');
    }
    return s;
}

// A PDF from its objects (object i + 1 is objects[i], without "obj"/"endobj"), with a correct
// cross-reference table; `trailer` is added to the trailer dictionary (after /Size and /Root 1 0
// R).
inline QByteArray make_pdf(const std::vector<QByteArray>& objects, const QByteArray& trailer = {}) {
    QByteArray out = "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n";
    std::vector<qsizetype> offsets;
    for (size_t i = 0; i < objects.size(); ++i) {
        offsets.push_back(out.size());
        out += QByteArray::number(static_cast<qulonglong>(i + 1)) + " 0 obj\n" + objects[i] +
               "\nendobj\n";
    }
    const qsizetype xref = out.size();
    out += "xref\n0 " + QByteArray::number(static_cast<qulonglong>(objects.size() + 1)) +
           "\n0000000000 65535 f \n";
    for (qsizetype off : offsets)
        out +=
            QByteArray::number(static_cast<qlonglong>(off)).rightJustified(10, '0') + " 00000 n \n";
    out += "trailer\n<< /Size " + QByteArray::number(static_cast<qulonglong>(objects.size() + 1)) +
           " /Root 1 0 R " + trailer + " >>\nstartxref\n" +
           QByteArray::number(static_cast<qlonglong>(xref)) + "\n%%EOF\n";
    return out;
}

// A one-page PDF of `w` x `h` points showing `text` (Helvetica) near the top left, or nothing.
inline QByteArray make_simple_pdf(double w, double h, const QByteArray& text) {
    const QByteArray content =
        text.isEmpty()
            ? QByteArray()
            : "BT /F1 24 Tf 72 " + QByteArray::number(h - 96, 'f', 2) + " Td (" + text + ") Tj ET";
    return make_pdf({
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 " + QByteArray::number(w, 'f', 2) + " " +
            QByteArray::number(h, 'f', 2) +
            "] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        "<< /Length " + QByteArray::number(content.size()) + " >>\nstream\n" + content +
            "\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    });
}

}  // namespace sl::test
