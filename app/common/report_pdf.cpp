#include "app/common/report_pdf.h"

#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QPageLayout>
#include <QPageSize>
#include <QPdfWriter>
#include <QTextDocument>
#include <QUrl>

#include "core/util/error.h"

namespace sl::app {

void write_report_pdf(const Report& r, const std::string& path, const ThumbnailFn& thumbs) {
    if (!qobject_cast<QGuiApplication*>(QCoreApplication::instance()))
        throw Error(path + ": PDF export needs a QGuiApplication (fonts); none is running");
    QTextDocument doc;
    doc.setDefaultStyleSheet(QStringLiteral(".meta{color:#666666} .weak{color:#b36b00} td{padding:4px}"));
    const std::string body = report_html_with(r, thumbs, [&](size_t chat, size_t cit, const Thumbnail& t) {
        QImage img;
        if (!img.loadFromData(t.bytes.data(), static_cast<int>(t.bytes.size()))) return std::string();
        const std::string name = "thumb-" + std::to_string(chat) + "-" + std::to_string(cit);
        doc.addResource(QTextDocument::ImageResource, QUrl(QString::fromStdString(name)), img);
        return name;
    });
    doc.setHtml(QString::fromStdString("<html><body>" + body + "</body></html>"));

    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::WriteOnly)) throw IoError(path + ": cannot write the report: " + file.errorString().toStdString());
    {
        QPdfWriter writer(&file);
        writer.setTitle(QString::fromStdString(r.title));
        writer.setCreator(QStringLiteral("Sightline"));
        writer.setPageSize(QPageSize(QPageSize::A4));
        writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);
        doc.print(&writer);
    }
    file.close();
    if (file.error() != QFileDevice::NoError)
        throw IoError(path + ": cannot write the report: " + file.errorString().toStdString());
}

}  // namespace sl::app
