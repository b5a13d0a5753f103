#include "ingest/pdf/pdf_open.h"

#include <QFile>
#include <QVariant>

#include <mutex>

#include "ingest/ingest_error.h"
#include "ingest/qt_file_path.h"

namespace sl::ingest {

namespace {

void drop_message(const QString& /*message*/, const QVariant& /*closure*/) {}

}  // namespace

void quiet_poppler() {
    static std::once_flag once;
    std::call_once(once, [] { Poppler::setDebugErrorFunction(&drop_message, QVariant()); });
}

std::unique_ptr<Poppler::Document> open_pdf(const std::string& path) {
    quiet_poppler();
    const QtFilePath name(path);  // a file name need not be UTF-8
    QFile f(name.qt());
    if (!f.open(QIODevice::ReadOnly))
        throw IngestError(IngestErrorKind::Io, path,
                          "cannot open: " + f.errorString().toStdString());
    // PDF readers accept the header anywhere in the first 1024 bytes.
    const QByteArray head = f.read(1024);
    f.close();
    if (!head.contains("%PDF-"))
        throw IngestError(IngestErrorKind::Unsupported, path, "not a PDF (no %PDF- header)");

    std::unique_ptr<Poppler::Document> pdf = Poppler::Document::load(name.qt());
    if (!pdf)
        throw IngestError(IngestErrorKind::Corrupt, path,
                          "the PDF is damaged and cannot be opened (truncated or malformed)");
    if (pdf->isLocked())
        throw IngestError(IngestErrorKind::Encrypted, path,
                          "the PDF is encrypted and needs a password");
    pdf->setRenderHint(Poppler::Document::Antialiasing, true);
    pdf->setRenderHint(Poppler::Document::TextAntialiasing, true);
    return pdf;
}

}  // namespace sl::ingest
