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

// Deletes the files that lie under kv_dir (others are left alone); errors are ignored. `files` as
// stored (resolve_kv_path).
void remove_kv_files(const std::filesystem::path& kv_dir, const std::vector<std::string>& files);

// A saved context's path as the kv_caches table stores it: relative to the library folder `dir`
// when the file lies in it ("kv/abc.slkv"), so a copied or moved library keeps finding its files;
// absolute otherwise.
std::string stored_kv_path(const std::filesystem::path& dir, const std::string& path);
// The path a stored one names: relative ones are the library folder's (records written before
// paths were stored so were relative to the working directory of the run that saved them: such a
// path is taken as it is when the library has no file by that name but the working directory has).
std::string resolve_kv_path(const std::filesystem::path& dir, const std::string& stored);

}  // namespace sl::library_internal
