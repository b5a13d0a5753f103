#include "ingest/readers.h"

namespace sl::ingest {

void register_builtin_readers(std::vector<std::unique_ptr<Reader>>& out) {
    (void)out;  // Readers are added here as their formats land.
}

}  // namespace sl::ingest
