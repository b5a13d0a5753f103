#include "app/common/version_report.h"

#include <QtGlobal>
#include <sqlite3.h>

#include "ingest/library_versions.h"
#include "kernels/cpu/cpu_features.h"
#include "core/runtime/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "sightline/build_config.h"

namespace sl::app {

namespace {

std::string cpu_line() {
    const auto& f = kernels::cpu_features();
    std::string s = std::string("kernels ") + kernels::isa_name(kernels::active_isa()) + " (CPU has";
    const std::pair<bool, const char*> flags[] = {
        {f.avx2, "avx2"},         {f.fma, "fma"},           {f.f16c, "f16c"},
        {f.avx512f, "avx512f"},   {f.avx512bw, "avx512bw"}, {f.avx512vnni, "avx512vnni"},
        {f.avx512bf16, "avx512bf16"}};
    bool any = false;
    for (const auto& [on, name] : flags) {
        if (!on) continue;
        s += std::string(" ") + name;
        any = true;
    }
    return s + (any ? ")" : " no SIMD extensions we use)");
}

}  // namespace

VersionReport version_report() {
    VersionReport r;
    r.sightline = SIGHTLINE_VERSION;
    r.build = std::string(SIGHTLINE_BUILD_TYPE) + ", " + SIGHTLINE_COMPILER;
    r.libraries.emplace_back("Qt", std::string(qVersion()) + " (built with " QT_VERSION_STR ")");
    for (auto& lib : ingest::library_versions()) r.libraries.push_back(std::move(lib));
    r.libraries.emplace_back("SQLite", sqlite3_libversion());
    r.cpu = cpu_line();
    const cuda::DeviceStatus st = cuda::probe();
    r.cuda_compiled = st.compiled;
    r.cuda_usable = st.usable;
    if (!st.compiled) {
        r.cuda = "not compiled in (built without CUDA); using the CPU";
    } else {
        const std::string rt = std::to_string(st.runtime_version / 1000) + "." +
                               std::to_string((st.runtime_version % 1000) / 10);
        r.cuda = "compiled in (runtime " + rt + ", sm_86/89/90/120 + PTX); device " +
                 (st.usable ? "usable: " + st.message : "not usable: " + st.message + "; using the CPU");
        // Whole sessions on the device are opt-in until checked on one (core/runtime/cuda_backend.h).
        if (st.usable && !cuda_model_opted_in()) r.cuda += "; sessions run on the CPU unless SIGHTLINE_CUDA_MODEL=1";
    }
    return r;
}

std::string format_version_report(const VersionReport& r) {
    std::string s = "Sightline " + r.sightline + " (" + r.build + ")\n";
    auto line = [&s](const std::string& name, const std::string& value) {
        s += "  " + name + std::string(name.size() < 14 ? 14 - name.size() : 1, ' ') + value + "\n";
    };
    for (const auto& [name, version] : r.libraries) line(name, version);
    line("CPU", r.cpu);
    line("CUDA", r.cuda);
    return s;
}

}  // namespace sl::app
