// The report as a PDF (Qt's QTextDocument laid out on a QPdfWriter, A4), with the same content as
// the HTML report: answers with markers, numbered sources with locators, snippets and thumbnails.
//
// Needs a QGuiApplication (fonts): throws sl::Error saying so under a plain QCoreApplication.
// Runs on the GUI / main thread. Throws sl::IoError naming the file when it cannot be written.
#pragma once

#include <string>

#include "app/common/report.h"

namespace sl::app {

void write_report_pdf(const Report& r, const std::string& path, const ThumbnailFn& thumbs = {});

}  // namespace sl::app
