// File names as bytes for Qt. Sightline keeps paths as the bytes the system gave (a file name need
// not be UTF-8: an old archive's Latin-1 "r\xe9sum\xe9.pdf"), but Qt decodes every QString path as
// UTF-8 and cannot name such a file. QtFilePath opens it with open(2) and hands Qt the descriptor's
// /proc/self/fd/N name instead; a UTF-8 path goes to Qt as it is.
//
// Threading: a QtFilePath is used by one thread; the helpers are pure and thread-safe.
#pragma once

#include <QString>

#include <string>

namespace sl::ingest {

class QtFilePath {
public:
    // Opens `path` read-only when Qt cannot name it; never throws (a file that cannot be opened is
    // handed to Qt by its decoded name, so that Qt's own open reports the error).
    explicit QtFilePath(const std::string& path);
    ~QtFilePath();
    QtFilePath(const QtFilePath&) = delete;
    QtFilePath& operator=(const QtFilePath&) = delete;

    // What to give Qt (QFile, QImageReader, Poppler): valid while this object lives.
    const QString& qt() const { return qt_; }
    // Whether the name went through a descriptor (it is not valid UTF-8).
    bool through_descriptor() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    QString qt_;
};

// The last component of `path`, as bytes ("r\xe9sum\xe9.pdf"): what titles and messages show.
std::string file_name_of(const std::string& path);
// The extension of `path`'s last component in lower case, without the dot; "" when none.
std::string extension_of(const std::string& path);

}  // namespace sl::ingest
