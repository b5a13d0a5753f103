#include "ingest/qt_file_path.h"

#include <QFile>

#include <fcntl.h>
#include <unistd.h>

namespace sl::ingest {

QtFilePath::QtFilePath(const std::string& path) : qt_(QFile::decodeName(QByteArray::fromStdString(path))) {
    if (QFile::encodeName(qt_).toStdString() == path) return;  // Qt names it exactly
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ >= 0) qt_ = QStringLiteral("/proc/self/fd/%1").arg(fd_);
}

QtFilePath::~QtFilePath() {
    if (fd_ >= 0) ::close(fd_);
}

std::string file_name_of(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string extension_of(const std::string& path) {
    const std::string name = file_name_of(path);
    const size_t dot = name.find_last_of('.');
    if (dot == std::string::npos || dot == 0) return {};
    std::string ext = name.substr(dot + 1);
    for (char& c : ext)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return ext;
}

}  // namespace sl::ingest
