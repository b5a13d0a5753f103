// The library's schema as an ordered list of migrations: migration i takes a database from schema
// version i to i + 1 (version 0 = empty file). migrate() applies the missing ones in one
// transaction and records the version in the schema_version table. Internal to core/library.
#pragma once

#include <string>
#include <vector>

struct sqlite3;

namespace sl::library_schema {

// SQL of each migration, in order; size() == Library::kSchemaVersion.
const std::vector<const char*>& migrations();

// The version recorded in the database: 0 for an empty database. Throws FormatError when the
// database has tables but no schema_version table (not a Sightline library).
int read_version(sqlite3* db);

// Brings the database to the current version in one transaction. Throws FormatError when it is
// newer than this build knows.
void migrate(sqlite3* db);

// What the schema of `db` lacks against the current one (a table, or a column of a table), in
// words; empty when nothing. Compares with the migrations applied to an in-memory database.
std::vector<std::string> schema_problems(sqlite3* db);

}  // namespace sl::library_schema
