// Small per-token operators of the transformer: norms, RoPE, softmax, activations. Each is O(d) per
// token (matmuls and attention dominate), so these are plain loops the compiler vectorises; the
// scalar code is the reference. All pure and thread-safe; in-place use (out == x) is allowed.
#pragma once

#include <cstdint>

namespace sl::kernels {

// out (n) = x (n) / rms(x) * w (n), rms = sqrt(mean(x^2) + eps). w may be null (no weight).
void rms_norm(float* out, const float* x, const float* w, int64_t n, float eps);

enum class RopeStyle {
    Norm,  // rotate adjacent pairs (x[2i], x[2i+1]); llama.cpp's LLAMA_ROPE_TYPE_NORM (llama arch)
    Neox,  // rotate (x[i], x[i + rot/2]); LLAMA_ROPE_TYPE_NEOX (qwen2, gpt-neox, minimax-m3)
};

// Rotates the first `rot_dim` dims of each of `n_heads` heads of x (n_heads, head_dim) in place for
// position `pos`: theta_i = pos * freq_scale * base^(-2i / rot_dim) / freq_factors[i] (freq_factors:
// rot_dim / 2 divisors, Llama 3.1's rope_freqs; null for none).
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, float base, float freq_scale,
          RopeStyle style, const float* freq_factors = nullptr);

// In place: x (n) <- softmax(x). Returns the max (useful for online-softmax callers).
float softmax(float* x, int64_t n);

// out (n) = silu(gate) * up, silu(g) = g / (1 + e^-g).
void silu_mul(float* out, const float* gate, const float* up, int64_t n);

// out (n) = gelu(gate) * up with the tanh approximation (Gemma's gelu_pytorch_tanh):
// gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n);

// out (n) = swiglu_oai(gate, up) as GPT-OSS and MiniMax-M3 use it (ggml_swiglu_oai):
// g = min(gate, limit), u = clamp(up, -limit, limit), out = g / (1 + e^(-alpha g)) * (u + 1).
void swiglu_oai_mul(float* out, const float* gate, const float* up, int64_t n, float alpha, float limit);

// y (n) += x (n)
void add(float* y, const float* x, int64_t n);

// In place: x (n) <- exp(x - shift); returns the sum of the results (in double precision for the
// reference, f32 lanes for the SIMD tiers). The softmax and attention inner loop; dispatched.
// SIMD tiers use a degree-6 polynomial after range reduction: relative error < 4e-7 for
// arguments in [-87, 0], exact 0 below (the only range softmax needs).
float exp_shifted_sum(float* x, int64_t n, float shift);

// The largest of x (n >= 1): the softmax's shift over a row of attention scores; dispatched (a
// scalar compare chain costs ~4 cycles a score, which a 1,500-key encoder row made 14 % of
// Whisper's encoder). -inf entries are fine; NaN is not ordered (the tiers may differ on it).
float max_f32(const float* x, int64_t n);

// Dot product of two f32 rows; dispatched (AVX2 / AVX-512) since attention spends its time here.
float dot_f32(const float* a, const float* b, int64_t n);

// y (n) += a * x (n); dispatched likewise.
void axpy_f32(float* y, float a, const float* x, int64_t n);

// Attention rows: out (n) = scale * (q (d) · k_j) for keys k_j = k + j * k_stride, j < n.
// AVX-512 / AVX2 score 16 / 8 keys at a time with one shared horizontal reduction.
void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d,
                  float scale);

// out (d) += sum_j p (n)[j] * v_j for rows v_j = v + j * v_stride: the P·V product of attention,
// accumulated in registers.
void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d);

// The dispatched implementations as function pointers, for loops that call them many times
// (attention calls dot_f32 once per key): resolve once per call instead of once per key.
using DotF32Fn = float (*)(const float*, const float*, int64_t);
using AxpyF32Fn = void (*)(float*, float, const float*, int64_t);
DotF32Fn dot_f32_fn();
AxpyF32Fn axpy_f32_fn();

namespace ref {
float max_f32(const float* x, int64_t n);
void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d,
                  float scale);
void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d);
float exp_shifted_sum(float* x, int64_t n, float shift);
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float* y, float a, const float* x, int64_t n);
}  // namespace ref

namespace avx2 {
float max_f32(const float* x, int64_t n);
void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d,
                  float scale);
void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d);
float exp_shifted_sum(float* x, int64_t n, float shift);
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float* y, float a, const float* x, int64_t n);
}  // namespace avx2

namespace avx512 {
float max_f32(const float* x, int64_t n);
void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d,
                  float scale);
void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d);
float exp_shifted_sum(float* x, int64_t n, float shift);
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float* y, float a, const float* x, int64_t n);
}  // namespace avx512

}  // namespace sl::kernels
