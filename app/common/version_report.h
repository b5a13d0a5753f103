// What `sightline-cli --version` and Help → About print: Sightline's version, the libraries it
// linked, the CPU kernel tier and the CUDA state.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sl::app {

struct VersionReport {
    std::string sightline;                                    // "0.1.0"
    std::string build;                                        // build type and compiler
    std::vector<std::pair<std::string, std::string>> libraries;  // (name, version)
    std::string cpu;                                          // active kernel tier and features
    bool cuda_compiled = false;
    bool cuda_usable = false;
    std::string cuda;                                         // one line on the CUDA state
};

// Gathers the report; probes the CUDA driver once (may take ~100 ms). Thread-safe.
VersionReport version_report();

// Multi-line text, one library per line, for terminals and the About box.
std::string format_version_report(const VersionReport& report);

}  // namespace sl::app
