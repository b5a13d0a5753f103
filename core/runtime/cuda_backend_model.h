// A LlamaModel's forward pass on CUDA device 0 (kernels/cuda): the weights uploaded once (types the
// device kernels take as they are; any other type dequantized on the host and uploaded as f16), a
// paged bf16 KV cache on the device, and dense attention through the MSA sparse kernel with every
// visible block selected. Linear layers are the quantized matrix-vector kernels with f32
// activations (up to 4 tokens per pass over the weights: fine for decode and for small models'
// prefill; cuBLAS prefill is the next step).
//
// Built only with CUDA (SIGHTLINE_HAVE_CUDA); construction throws sl::Error naming the CUDA error
// or what does not fit (e.g. a head_dim the kernels do not take). One forward at a time.
#pragma once

#include <cstdint>
#include <memory>

namespace sl {

class LlamaModel;

class CudaLlamaRunner {
public:
    // n_ctx: most positions the device cache holds. Throws sl::Error without a usable device.
    CudaLlamaRunner(const LlamaModel& model, int n_ctx);
    ~CudaLlamaRunner();
    CudaLlamaRunner(const CudaLlamaRunner&) = delete;
    CudaLlamaRunner& operator=(const CudaLlamaRunner&) = delete;

    // Runs tokens[0..n) at positions n_past()..n_past()+n-1 and writes the logits of the last one
    // (n_vocab floats, host memory). Throws sl::Error on bad tokens, a full context or a CUDA error.
    void forward(const int32_t* tokens, int n, float* logits);

    int64_t n_past() const;
    void reset();  // forgets the context (the cache blocks are reused)
    int64_t device_bytes() const;  // weights + cache + scratch on the device

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sl
