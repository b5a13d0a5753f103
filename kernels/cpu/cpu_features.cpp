#include "kernels/cpu/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sl::kernels {

namespace {

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    // F16C has no __builtin_cpu_supports name in older compilers; every AVX2 CPU has it.
    f.f16c = f.avx2;
#endif
    return f;
}

Isa from_features(const CpuFeatures& f) {
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx2 && f.fma)
        return Isa::Avx512;
    if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
    return Isa::Scalar;
}

Isa from_env(Isa max) {
    const char* v = std::getenv("SIGHTLINE_ISA");
    if (!v) return max;
    Isa want = max;
    if (std::strcmp(v, "scalar") == 0) want = Isa::Scalar;
    else if (std::strcmp(v, "avx2") == 0) want = Isa::Avx2;
    else if (std::strcmp(v, "avx512") == 0) want = Isa::Avx512;
    return static_cast<int>(want) < static_cast<int>(max) ? want : max;
}

std::atomic<int>& active_slot() {
    static std::atomic<int> slot{static_cast<int>(from_env(max_supported_isa()))};
    return slot;
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

Isa max_supported_isa() {
    static const Isa isa = from_features(cpu_features());
    return isa;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
    const Isa max = max_supported_isa();
    if (static_cast<int>(isa) > static_cast<int>(max)) isa = max;
    active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
    }
    return "unknown";
}

}  // namespace sl::kernels
