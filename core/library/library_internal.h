// Helpers shared by the library's .cpp files. Internal to core/library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/library/library.h"

namespace sl::library_internal {

int64_t now_ms();

// Deletes a document row (its content cascades) and the KV cache records that include it, inside
// the caller's transaction; appends those records' file paths to *kv_files.
void delete_document_rows(sqlite3* db, DocId id, std::vector<std::string>* kv_files);

// Deletes the files that lie under kv_dir (others are left alone); errors are ignored.
void remove_kv_files(const std::filesystem::path& kv_dir, const std::vector<std::string>& files);

}  // namespace sl::library_internal
