// Run-time detection of the x86-64 instruction sets the CPU kernels can use.
#pragma once

namespace sl::kernels {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512vnni = false;
    bool avx512bf16 = false;
};

// Detected once, on first use; thread-safe.
const CpuFeatures& cpu_features();

// The instruction-set tiers our kernels are written for.
enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// The best tier this CPU supports, lowered by the environment variable SIGHTLINE_ISA
// (scalar|avx2|avx512) when set, so tests and benchmarks can force a tier. Never raised above
// what the CPU has.
Isa active_isa();

// Forces a tier for this process (tests, benchmarks); clamped to what the CPU supports.
// Not thread-safe against concurrent kernel calls: call before starting work.
void set_active_isa(Isa isa);

// The best tier the CPU supports, ignoring overrides.
Isa max_supported_isa();

const char* isa_name(Isa isa);

}  // namespace sl::kernels
