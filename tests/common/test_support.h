// Helpers shared by the test suites. Tests run with the cache that scripts/setup.sh fills.
#pragma once

#include <QString>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace sl::test {

// The cached file at `relative_path` (e.g. "samples/pdf/refman.pdf" or assets::kDefaultModel).
// When it is missing, fails the current test loudly with the set-up command to run, and returns
// an empty path; use through REQUIRE_ASSET.
std::filesystem::path require_asset(const std::string& relative_path);

// A generator seeded from SIGHTLINE_TEST_SEED, else from the clock; the seed is printed once so a
// failure can be replayed. Tests draw fresh inputs each run.
std::mt19937_64& rng();

// n floats uniform in [lo, hi).
std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f);

// ‖a − b‖ / ‖b‖ over n values (‖b‖ == 0 gives ‖a‖).
double normalized_error(const float* a, const float* b, size_t n);

// The Python of the project's venv ($SIGHTLINE_VENV, else <cache>/venv), with gguf and numpy.
// When it is missing, fails the current test naming the set-up command and returns "".
QString require_venv_python();

// <source>/tests/reference/<relative>: the independent reference scripts.
QString reference_script(const QString& relative);

// Runs `program args`, waits up to timeout_ms; on failure (start error, timeout, non-zero exit)
// fails the current test with the command's stderr and returns false. stdout goes to *out.
bool run_process(const QString& program, const QStringList& args, QByteArray* out, int timeout_ms = 300000);

}  // namespace sl::test

// Declares `var` as the cached asset's path, or returns from the test (which has failed).
#define REQUIRE_ASSET(var, relative_path)                                \
    const std::filesystem::path var = ::sl::test::require_asset(relative_path); \
    if (var.empty()) return
