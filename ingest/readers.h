// The built-in readers. Each format's folder defines its make_*_reader(); register_builtin_readers
// (ingest/readers.cpp) lists them in sniffing order.
#pragma once

#include <memory>
#include <vector>

#include "ingest/reader.h"

namespace sl::ingest {

void register_builtin_readers(std::vector<std::unique_ptr<Reader>>& out);

}  // namespace sl::ingest
