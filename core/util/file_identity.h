// A file's identity as it is now: path, device, inode, size and modification time (ns), as one
// string. Two equal identities mean the file was not replaced, grown or rewritten in between (to
// the clock's resolution); "" when the file cannot be stat'ed. Thread-safe.
#pragma once

#include <string>

namespace sl {

std::string file_identity(const std::string& path);

}  // namespace sl
