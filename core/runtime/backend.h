// Where the engine runs: the CPU kernels or an NVIDIA GPU through kernels/cuda.
//
// backend_for("auto" | "cpu" | "cuda") picks one and says why in `reason`:
//   auto — CUDA when this binary has the CUDA kernels and device 0 is usable, else the CPU
//          (reason e.g. "CPU: CUDA device not usable: no NVIDIA driver found (CUDA runtime 13.0)");
//   cpu  — the CPU, always;
//   cuda — CUDA, or sl::Error with the probe's message when no device is usable (the user asked
//          for it explicitly, so a silent fallback would hide the problem).
// The choice is cheap after the first call (the device probe is cached) and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace sl {

enum class DeviceKind { Cpu, Cuda };

// What a backend can run today. Pieces land one at a time; Session asks before routing work.
struct BackendCaps {
    bool linear = false;      // quantized matrix-vector (decode) and f16/bf16 GEMM (prefill)
    bool small_ops = false;   // RMSNorm, RoPE, SwiGLU, softmax, argmax / top-k
    bool msa = false;         // MSA index scoring, top-k selection, sparse attention, paged KV
    bool full_model = false;  // a whole LlamaModel forward pass
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual DeviceKind kind() const = 0;
    virtual const char* name() const = 0;          // "cpu" | "cuda"
    virtual std::string description() const = 0;  // one line: device name, memory, ...
    virtual BackendCaps caps() const = 0;
};

struct BackendChoice {
    std::shared_ptr<Backend> backend;  // never null
    std::string reason;                // one line for the user: what was chosen and why
};

// Parses "auto" | "cpu" | "cuda" (case-sensitive). Throws sl::Error for any other text, naming it,
// and for "cuda" when no CUDA device is usable.
BackendChoice backend_for(std::string_view device);

// The backend a Session runs the whole model on: backend_for(device), then, when that backend cannot
// run a full forward pass (BackendCaps::full_model; on CUDA opt-in for now: cuda_backend.h), the
// CPU with a reason saying so, e.g. "CPU: NVIDIA H200 (sm_90, ...) is usable, but the model
// forward does not run on cuda by default yet (SIGHTLINE_CUDA_MODEL=1 runs it there)".
// Throws like backend_for for bad names and for "cuda" without a usable device.
BackendChoice backend_for_model(std::string_view device);

// The CPU backend (a process-wide instance).
std::shared_ptr<Backend> cpu_backend();

}  // namespace sl
