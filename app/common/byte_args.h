// Command-line arguments as the bytes the system gave. A file name need not be UTF-8 (Latin-1 names
// from an old archive), and QCoreApplication::arguments() replaces its stray bytes with U+FFFD, so
// the file it names can no longer be found. decode_arg keeps each byte that is not UTF-8 as a lone
// surrogate U+DC80..U+DCFF (as Python's surrogateescape does); arg_bytes turns such a QString back
// into the original bytes, for paths. Pure functions; thread-safe.
#pragma once

#include <QString>
#include <QStringList>

#include <string>

namespace sl {

// UTF-8 as usual; a byte that does not start or continue valid UTF-8 becomes U+DC00 + byte.
QString decode_arg(const char* arg);
// argv[1..argc) through decode_arg.
QStringList decode_args(int argc, char** argv);
// The bytes back: UTF-8 for text, the original byte for each U+DC80..U+DCFF.
std::string arg_bytes(const QString& arg);

}  // namespace sl
